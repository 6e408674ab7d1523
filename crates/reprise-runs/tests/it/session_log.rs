//! session.log: plain text, escape sequences stripped.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use reprise_runs::{EscapeStripper, SessionLog, create_run_folder, strip_escapes};

#[test]
fn colours_and_cursor_moves_are_removed() {
    assert_eq!(strip_escapes("\x1b[1;31mred\x1b[0m plain"), "red plain");
    assert_eq!(strip_escapes("\x1b[38;2;255;100;0mtrue\x1b[39m"), "true");
    assert_eq!(strip_escapes("\x1b[2K\x1b[1Gline\x1b[K"), "line");
    assert_eq!(
        strip_escapes("\x1b[?25l\x1b[?1049hscreen\x1b[?1049l\x1b[?25h"),
        "screen"
    );
    assert_eq!(strip_escapes("\x1b[5;10H\x1b[2J\x1b[>4;2mtext"), "text");
}

#[test]
fn osc_dcs_and_short_escapes_are_removed() {
    assert_eq!(strip_escapes("\x1b]0;window title\x07after"), "after");
    assert_eq!(strip_escapes("\x1b]2;title\x1b\\after"), "after");
    // An OSC 8 hyperlink keeps its visible text only.
    assert_eq!(
        strip_escapes("see \x1b]8;;https://example.com/x\x1b\\the link\x1b]8;;\x1b\\ now"),
        "see the link now"
    );
    assert_eq!(strip_escapes("\x1bP1$r0m\x1b\\dcs"), "dcs");
    assert_eq!(strip_escapes("\x1b_apc payload\x1b\\apc"), "apc");
    assert_eq!(strip_escapes("\x1b7saved\x1b8\x1b=\x1b>\x1bc"), "saved");
    assert_eq!(strip_escapes("\x1b(Bcharset\x1b)0\x1b#8"), "charset");
}

#[test]
fn eight_bit_controls_and_stray_control_characters_are_removed() {
    assert_eq!(strip_escapes("\u{9b}31mred\u{9b}0m"), "red");
    assert_eq!(strip_escapes("\u{9d}0;title\u{9c}text"), "text");
    assert_eq!(
        strip_escapes("bell\x07 back\x08space\r\nnext\ttab"),
        "bell backspace\nnext\ttab"
    );
}

#[test]
fn ordinary_text_is_kept_as_is() {
    let text = "héllo wörld — 日本語 [brackets] ]not osc] ~ \\ 100% done\n";
    assert_eq!(strip_escapes(text), text);
}

#[test]
fn sequences_split_across_writes_are_still_removed_whole() {
    let whole = "a\x1b[1;32mb\x1b]0;t\x1b\\c\x1b[0md\u{9b}2Ke";
    let chars: Vec<char> = whole.chars().collect();
    for cut in 0..=chars.len() {
        let (left, right): (String, String) =
            (chars[..cut].iter().collect(), chars[cut..].iter().collect());
        let mut stripper = EscapeStripper::new();
        let out = stripper.strip(&left) + &stripper.strip(&right);
        assert_eq!(out, "abcde", "cut at {cut}");
    }
}

#[test]
fn a_real_looking_ratatui_frame_strips_to_its_text() {
    let frame = "\x1b[?2004h\x1b[?1049h\x1b[1;1H\x1b[38;5;12m\x1b[48;5;0m┌ reprise ┐\x1b[39m\x1b[49m\r\n\
                 \x1b[2;1H\x1b[1m>\x1b[22m hello\x1b[0m\x1b[?25h\x1b]0;reprise\x07";
    assert_eq!(strip_escapes(frame), "┌ reprise ┐\n> hello");
}

#[test]
fn the_log_appends_plain_text_to_a_private_file_in_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let run = create_run_folder(tmp.path()).unwrap();
    {
        let mut log = SessionLog::open(&run.dir).unwrap();
        log.write("\x1b[1mbold\x1b[").unwrap();
        log.write("0m start\r\n").unwrap();
        log.write_line("\x1b[32m> ok\x1b[0m").unwrap();
        log.sync().unwrap();
    }
    // A resumed run keeps writing to the same file.
    let mut again = SessionLog::open(&run.dir).unwrap();
    again.write_line("resumed").unwrap();
    let path = run.dir.join("session.log");
    assert_eq!(again.path(), path);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "bold start\n> ok\nresumed\n"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}
