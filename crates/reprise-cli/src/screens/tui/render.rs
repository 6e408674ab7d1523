//! Drawing the chat: pure functions from a [`ChatView`] to a frame.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use reprise_chat::text::counted;
use unicode_width::UnicodeWidthStr;

use super::markdown;
use super::view::{ChatView, Item, Menu, Picker, Question, SubagentWork, ToolView};
use super::wrap::{wrap_line, wrap_lines};
use crate::display::terminal::visible;
use reprise_chat::start::PickerRow;
use reprise_chat::text::{arguments_preview_of, one_line, shorten};

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const DIM: Style = Style::new().fg(Color::DarkGray);
/// How many characters of a tool's arguments are shown.
const ARGUMENTS_SHOWN: usize = 60;
/// The fewest characters of a result's line shown, however narrow the screen.
const MIN_RESULT_WIDTH: usize = 20;
use reprise_chat::view::live::RESULT_LINES_SHOWN;

/// Text from outside (the model, tools, run folders, history) as the screen may show
/// it: controls as visible escapes (see `display::terminal`), and tabs as spaces, since a
/// cell cannot hold a tab.
pub fn screen_text(text: &str) -> String {
    visible(text).replace('\t', "    ")
}

/// Draws the whole screen: conversation, status line, and the prompt (or the picker,
/// or a step-gate question, in its place).
pub fn draw(frame: &mut Frame<'_>, view: &ChatView) {
    let area = frame.area();
    let bottom = bottom_height(view, area);
    let [conversation, status, bottom_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(bottom),
    ])
    .areas(area);
    draw_conversation(frame, view, conversation);
    frame.render_widget(Paragraph::new(status_line(view, status.width)), status);
    draw_bottom(frame, view, bottom_area);
}

/// Draws only the live part (what is still changing): the reply arriving now, the
/// status line and the prompt. The inline mode prints finished items above it.
pub fn draw_live(frame: &mut Frame<'_>, view: &ChatView) {
    let area = frame.area();
    let bottom = bottom_height(view, area);
    let [live, status, bottom_area] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(bottom),
    ])
    .areas(area);
    let width = usize::from(live.width);
    // Subagents still working are live too: their calls stay out of the scrollback
    // until they return.
    let mut live_lines = Vec::new();
    for (index, _) in view.conversation.work.iter().filter(|(index, _)| {
        matches!(
            view.conversation.items.get(**index),
            Some(Item::Tool(ToolView { result: None, .. }))
        )
    }) {
        live_lines.extend(view_item_lines(view, *index, width));
    }
    live_lines.extend(markdown::render(&screen_text(&view.conversation.streaming)));
    live_lines.extend(arriving_lines(view));
    let lines = wrap_lines(&live_lines, width);
    let skip = lines.len().saturating_sub(usize::from(live.height));
    frame.render_widget(Paragraph::new(lines[skip..].to_vec()), live);
    frame.render_widget(Paragraph::new(status_line(view, status.width)), status);
    draw_bottom(frame, view, bottom_area);
}

fn bottom_height(view: &ChatView, area: Rect) -> u16 {
    let wanted = if let Some(picker) = &view.picker {
        picker.visible().len().clamp(1, 10) + 3
    } else if view.question.is_some() {
        4
    } else if let Some(menu) = &view.menu {
        menu_text_lines(menu).len() + menu.options.len().max(1) + 2
    } else {
        view.input.text.split('\n').count().min(6) + 2
    };
    u16::try_from(wanted)
        .unwrap_or(u16::MAX)
        .min(area.height.saturating_sub(2).max(1))
}

fn draw_bottom(frame: &mut Frame<'_>, view: &ChatView, area: Rect) {
    if let Some(picker) = &view.picker {
        draw_picker(frame, picker, area);
    } else if let Some(question) = &view.question {
        draw_question(frame, question, area);
    } else if let Some(menu) = &view.menu {
        draw_menu(frame, menu, area);
    } else {
        draw_input(frame, view, area);
    }
}

/// The calls whose arguments are arriving now: a call shows from its first
/// streamed piece, not only once its arguments are complete.
fn arriving_lines(view: &ChatView) -> Vec<Line<'static>> {
    view.conversation
        .arriving
        .iter()
        .flat_map(|name| {
            [
                Line::from(vec![
                    Span::styled("⚙ ", Style::new().fg(Color::Magenta)),
                    Span::styled(
                        screen_text(name),
                        Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
                    ),
                ]),
                Line::styled("  … its arguments are arriving", DIM),
            ]
        })
        .collect()
}

/// The lines of one item on a screen `width` columns wide, before wrapping.
pub fn item_lines(item: &Item, width: usize) -> Vec<Line<'static>> {
    match item {
        Item::User(text) => {
            let mut lines = Vec::new();
            for (i, line) in screen_text(text).split('\n').enumerate() {
                let marker = if i == 0 { "› " } else { "  " };
                lines.push(Line::from(vec![
                    Span::styled(
                        marker,
                        Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(line.to_owned(), Style::new().add_modifier(Modifier::BOLD)),
                ]));
            }
            lines
        }
        Item::Assistant(text) => markdown::render(&screen_text(text)),
        Item::Tool(tool) => tool_lines(tool, width),
        // A notice can hold a reply cut off mid-way: its line breaks are kept.
        Item::Notice(text) => screen_text(text)
            .split('\n')
            .map(|line| Line::styled(line.to_owned(), DIM.add_modifier(Modifier::ITALIC)))
            .collect(),
        Item::Warning(text) => vec![Line::styled(
            format!("! {}", screen_text(text)),
            Style::new().fg(Color::Yellow),
        )],
        Item::Error(text) => screen_text(text)
            .split('\n')
            .enumerate()
            .map(|(i, line)| {
                let marker = if i == 0 { "✗ " } else { "  " };
                Line::styled(format!("{marker}{line}"), Style::new().fg(Color::Red))
            })
            .collect(),
    }
}

/// The lines of the conversation's item `index`: a call to a subagent carries the
/// subagent's work under it.
pub fn view_item_lines(view: &ChatView, index: usize, width: usize) -> Vec<Line<'static>> {
    match (
        view.conversation.items.get(index),
        view.conversation.work.get(&index),
    ) {
        (Some(Item::Tool(tool)), Some(work)) => tool_lines_with_work(tool, work, width),
        (Some(item), _) => item_lines(item, width),
        (None, _) => Vec::new(),
    }
}

/// A call to a subagent: while it works, its replies and tool calls indented under
/// the call; once it returned, folded to one line above the result.
pub fn tool_lines_with_work(
    tool: &ToolView,
    work: &SubagentWork,
    width: usize,
) -> Vec<Line<'static>> {
    let mut lines = tool_lines(tool, width);
    let rest = lines.split_off(1.min(lines.len()));
    if tool.result.is_some() {
        let tools = work
            .items
            .iter()
            .filter(|item| matches!(item, Item::Tool(_)))
            .count();
        let replies = work.items.len() - tools;
        lines.push(Line::styled(
            format!(
                "  {}",
                reprise_chat::subagents::folded_line(&screen_text(&work.agent), tools, replies)
            ),
            DIM,
        ));
    } else {
        let inner = width.saturating_sub(4);
        let mut nested: Vec<Line<'static>> = work
            .items
            .iter()
            .flat_map(|item| item_lines(item, inner))
            .collect();
        nested.extend(markdown::render(&screen_text(&work.streaming)));
        for line in nested {
            let mut spans = vec![Span::styled("  │ ", DIM)];
            spans.extend(line.spans);
            lines.push(Line::from(spans).style(line.style));
        }
    }
    lines.extend(rest);
    lines
}

/// The call the step gate is asking about: the latest call of the asked tool
/// that has no result yet (calls are announced, then asked about, one by one).
fn waiting_call(view: &ChatView) -> Option<usize> {
    let question = view.question.as_ref()?;
    view.conversation.items.iter().rposition(|item| {
        matches!(item, Item::Tool(tool) if tool.result.is_none() && tool.name == question.tool)
    })
}

/// A tool call in a few lines: name, short arguments, a trimmed result (each of
/// its lines cut to the `width` of the screen).
pub fn tool_lines(tool: &ToolView, width: usize) -> Vec<Line<'static>> {
    tool_lines_pending(tool, "  … running", width)
}

/// [`tool_lines`], saying `pending` while the call has no result.
fn tool_lines_pending(tool: &ToolView, pending: &'static str, width: usize) -> Vec<Line<'static>> {
    let mut head = vec![Span::styled("⚙ ", Style::new().fg(Color::Magenta))];
    if !tool.agent.is_empty() {
        head.push(Span::styled(
            format!("[{}] ", screen_text(&tool.agent)),
            DIM,
        ));
    }
    head.push(Span::styled(
        screen_text(&tool.name),
        Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
    ));
    head.push(Span::styled(
        format!(
            " {}",
            shorten(
                &screen_text(&arguments_preview_of(
                    &tool.arguments,
                    tool.arguments_len,
                    str::to_owned
                )),
                ARGUMENTS_SHOWN
            )
        ),
        DIM,
    ));
    let mut lines = vec![Line::from(head)];
    match &tool.result {
        None => lines.push(Line::styled(pending, DIM)),
        Some(result) => {
            let (marker, style) = if result.is_error {
                ("  ✗ ", Style::new().fg(Color::Red))
            } else {
                ("  ↳ ", DIM)
            };
            let content = screen_text(&result.content);
            let content: Vec<&str> = content.trim_end().lines().collect();
            if content.is_empty() {
                lines.push(Line::styled(format!("{marker}(empty)"), style));
            }
            for (i, line) in content.iter().take(RESULT_LINES_SHOWN).enumerate() {
                let marker = if i == 0 { marker } else { "    " };
                let room = width.saturating_sub(marker.width()).max(MIN_RESULT_WIDTH);
                lines.push(Line::styled(
                    format!("{marker}{}", shorten(line, room)),
                    style,
                ));
            }
            let more = content.len().saturating_sub(RESULT_LINES_SHOWN) + result.folded_lines;
            if more > 0 {
                lines.push(Line::styled(
                    format!("    … {}", counted(more, "more line", "more lines")),
                    DIM,
                ));
            }
        }
    }
    lines
}

fn draw_conversation(frame: &mut Frame<'_>, view: &ChatView, area: Rect) {
    let width = usize::from(area.width);
    let height = usize::from(area.height);
    let wanted = height + view.scroll;
    // Lines are built from the bottom up and only as far as the screen needs, so a
    // conversation of thousands of messages costs what a screenful costs.
    let mut blocks: Vec<Vec<Line<'static>>> = Vec::new();
    let mut count = 0;
    if !view.conversation.arriving.is_empty() {
        let lines = wrap_lines(&arriving_lines(view), width);
        count += lines.len();
        blocks.push(lines);
    }
    if !view.conversation.streaming.is_empty() {
        let lines = wrap_lines(
            &markdown::render(&screen_text(&view.conversation.streaming)),
            width,
        );
        count += lines.len();
        blocks.push(lines);
    }
    let waiting = waiting_call(view);
    for index in (0..view.conversation.items.len()).rev() {
        if count >= wanted {
            break;
        }
        let shown = match &view.conversation.items[index] {
            Item::Tool(tool) if Some(index) == waiting => {
                tool_lines_pending(tool, "  … waiting for your answer", width)
            }
            _ => view_item_lines(view, index, width),
        };
        let mut lines = wrap_lines(&shown, width);
        lines.push(Line::default());
        count += lines.len();
        blocks.push(lines);
    }
    let mut lines: Vec<Line<'static>> = blocks.into_iter().rev().flatten().collect();
    if lines.last().is_some_and(|l| l.width() == 0)
        && view.conversation.streaming.is_empty()
        && view.conversation.arriving.is_empty()
    {
        lines.pop();
    }
    let end = lines
        .len()
        .saturating_sub(view.scroll.min(lines.len().saturating_sub(height)));
    let start = end.saturating_sub(height);
    frame.render_widget(Paragraph::new(lines[start..end].to_vec()), area);
}

fn status_line(view: &ChatView, width: u16) -> Line<'static> {
    let mut left = Vec::new();
    if let Some(elapsed) = view.busy {
        left.push(Span::styled(
            format!("{} ", SPINNER[view.tick % SPINNER.len()]),
            Style::new().fg(Color::Cyan),
        ));
        left.push(Span::raw(format!("working {}s", elapsed.as_secs())));
        // The clock stands still while the gate waits for the person.
        let hint = if view.question.is_some() {
            "  paused"
        } else {
            "  Ctrl-C stops"
        };
        left.push(Span::styled(hint, DIM));
    } else if view.scroll > 0 {
        left.push(Span::styled(
            format!("scrolled up {} lines (PgDn)", view.scroll),
            DIM,
        ));
    }
    if !view.queued.is_empty() {
        left.push(Span::styled(
            format!("  {} queued", view.queued.len()),
            Style::new().fg(Color::Yellow),
        ));
    }
    let mut right = String::new();
    if let Some((used, window)) = view.context {
        right.push_str(&format!(
            "ctx {}/{} · ",
            status_tokens(used),
            status_tokens(u64::from(window))
        ));
    }
    if let Some(usage) = view.conversation.usage {
        right.push_str(&format!(
            "{} in · {} out tokens  ",
            status_tokens(usage.prompt_tokens),
            status_tokens(usage.completion_tokens)
        ));
    }
    right.push_str(&screen_text(&view.model));
    if !view.run.is_empty() {
        right.push_str(&format!(" · {}", screen_text(&view.run)));
    }
    let used: usize = left.iter().map(|s| s.content.width()).sum();
    let room = usize::from(width).saturating_sub(used + 1);
    let right = shorten(&right, room);
    let gap = usize::from(width).saturating_sub(used + right.width());
    left.push(Span::raw(" ".repeat(gap)));
    left.push(Span::styled(right, DIM));
    Line::from(left)
}

/// A count on the status line: exact below 10,000, then `12.3k`.
fn status_tokens(tokens: u64) -> String {
    if tokens < 10_000 {
        tokens.to_string()
    } else {
        reprise_session::short_tokens(tokens)
    }
}

fn draw_input(frame: &mut Frame<'_>, view: &ChatView, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(DIM)
        .title(match &view.asking {
            Some(question) => Span::styled(
                format!(" {} · Enter · Esc cancels ", screen_text(question)),
                Style::new().fg(Color::Cyan),
            ),
            None => Span::styled(" /help · /resume · Ctrl-D exits ", DIM),
        });
    let inner = block.inner(area);
    // A line recalled from history.jsonl comes from disk: shown escaped, with the
    // cursor placed in the escaped text.
    let lines: Vec<Line<'static>> = screen_text(&view.input.text)
        .split('\n')
        .enumerate()
        .map(|(i, line)| {
            let marker = if i == 0 { "› " } else { "  " };
            Line::from(vec![
                Span::styled(marker, Style::new().fg(Color::Green)),
                Span::raw(line.to_owned()),
            ])
        })
        .collect();
    // Keep the cursor's line in view when the text is taller than the box.
    let before: String = view.input.text.chars().take(view.input.cursor).collect();
    let before = screen_text(&before);
    let cursor_row = before.matches('\n').count();
    let cursor_col = before.rsplit('\n').next().map_or(0, UnicodeWidthStr::width) + 2;
    let top = (cursor_row + 1).saturating_sub(usize::from(inner.height));
    let shown: Vec<Line<'static>> = lines.into_iter().skip(top).collect();
    let hscroll = cursor_col.saturating_sub(usize::from(inner.width).saturating_sub(1));
    frame.render_widget(
        Paragraph::new(shown)
            .block(block)
            .scroll((0, u16::try_from(hscroll).unwrap_or(0))),
        area,
    );
    if view.picker.is_none() && view.question.is_none() && view.menu.is_none() {
        let x = inner.x + u16::try_from(cursor_col - hscroll).unwrap_or(0);
        let y = inner.y + u16::try_from(cursor_row - top).unwrap_or(0);
        frame.set_cursor_position((x.min(inner.right().saturating_sub(1)), y));
    }
}

fn draw_picker(frame: &mut Frame<'_>, picker: &Picker, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Cyan))
        .title(" resume a run · type to filter · ↑/↓ Enter · Esc cancels ");
    let inner = block.inner(area);
    let mut lines = vec![Line::from(vec![
        Span::styled("filter: ", DIM),
        Span::raw(screen_text(&picker.filter)),
    ])];
    let visible = picker.visible();
    if visible.is_empty() {
        lines.push(Line::styled("  no run matches", DIM));
    }
    let rows = usize::from(inner.height.saturating_sub(1)).max(1);
    let first = (picker.selected + 1).saturating_sub(rows);
    for (i, row) in visible.iter().enumerate().skip(first).take(rows) {
        let selected = i == picker.selected;
        let style = if selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        let marker = if selected { "› " } else { "  " };
        let date = screen_text(&row.date);
        let room = usize::from(inner.width).saturating_sub(date.width() + 4);
        lines.push(Line::from(vec![
            Span::styled(format!("{marker}{date}  "), style),
            Span::styled(shorten(&one_line(&screen_text(row_text(row))), room), style),
        ]));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The lines of a menu's text (none when it has none).
fn menu_text_lines(menu: &Menu) -> Vec<String> {
    if menu.text.trim().is_empty() {
        return Vec::new();
    }
    screen_text(menu.text.trim_end())
        .split('\n')
        .map(str::to_owned)
        .collect()
}

/// A menu: its text first, cut to leave room for the choices, which are always
/// shown (scrolled to keep the highlighted one in view).
fn draw_menu(frame: &mut Frame<'_>, menu: &Menu, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Cyan))
        .title(format!(
            " {} · ↑/↓ Enter · Esc cancels ",
            screen_text(&menu.title)
        ));
    let inner = block.inner(area);
    let height = usize::from(inner.height).max(1);
    let width = usize::from(inner.width);
    let choices = menu.options.len().clamp(1, height);
    let text = menu_text_lines(menu);
    let room = height - choices;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if text.len() > room {
        let shown = room.saturating_sub(1);
        lines.extend(
            text[..shown]
                .iter()
                .map(|line| Line::raw(shorten(line, width))),
        );
        if room > 0 {
            lines.push(Line::styled(
                format!(
                    "  … {}",
                    counted(text.len() - shown, "more line", "more lines")
                ),
                DIM,
            ));
        }
    } else {
        lines.extend(text.iter().map(|line| Line::raw(shorten(line, width))));
    }
    let first = (menu.selected + 1).saturating_sub(choices);
    for (i, option) in menu.options.iter().enumerate().skip(first).take(choices) {
        let selected = i == menu.selected;
        let style = if selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        let marker = if selected { "› " } else { "  " };
        lines.push(Line::styled(
            format!(
                "{marker}{}",
                shorten(&one_line(&screen_text(option)), width.saturating_sub(2))
            ),
            style,
        ));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// What a picker row shows: the run's title (or first message), else its last
/// message.
fn row_text(row: &PickerRow) -> &str {
    if row.title.is_empty() {
        &row.last_message
    } else {
        &row.title
    }
}

fn draw_question(frame: &mut Frame<'_>, question: &Question, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Yellow))
        .title(" the step gate asks · Ctrl-C stops the turn ");
    let who = if question.agent.is_empty() {
        String::new()
    } else {
        format!("[{}] ", screen_text(&question.agent))
    };
    let width = usize::from(area.width).saturating_sub(20);
    let call = [
        Span::styled(
            screen_text(&question.tool),
            Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                " {}",
                shorten(
                    &screen_text(&arguments_preview_of(
                        &question.arguments,
                        question.arguments_len,
                        str::to_owned,
                    )),
                    width
                )
            ),
            DIM,
        ),
    ];
    let lines = if question.again {
        vec![
            Line::from([vec![Span::raw(who)], call.to_vec()].concat()),
            Line::from(format!(
                "this call {}",
                reprise_chat::session::AGAIN_QUESTION
            )),
            Line::from(vec![
                Span::styled("[y]", Style::new().fg(Color::Green)),
                Span::raw(" run it again  "),
                Span::styled("[n]", Style::new().fg(Color::Red)),
                Span::raw(" tell the model it was interrupted"),
            ]),
        ]
    } else {
        vec![
            Line::from(
                [
                    vec![Span::raw(format!("Run {who}"))],
                    call.to_vec(),
                    vec![Span::raw("?")],
                ]
                .concat(),
            ),
            Line::from(vec![
                Span::styled("[y]", Style::new().fg(Color::Green)),
                Span::raw(" yes  "),
                Span::styled("[n]", Style::new().fg(Color::Red)),
                Span::raw(" no  "),
                Span::styled("[a]", Style::new().fg(Color::Cyan)),
                Span::raw(" always for this run"),
            ]),
        ]
    };
    let lines: Vec<Line<'static>> = lines
        .iter()
        .flat_map(|line| wrap_line(line, usize::from(block.inner(area).width)))
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
