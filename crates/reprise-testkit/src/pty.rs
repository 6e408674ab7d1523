//! A program in a pseudo-terminal, its screen kept by a vt100 parser (feature `pty`).
//!
//! The screen is 80×24. Cursor-position queries (`ESC [ 6 n`) are answered as a real
//! terminal would, since inline full-screen programs ask where the cursor is; or,
//! with [`Pty::spawn_answering`], late or never, as some multiplexers do.
//!
//! ```no_run
//! # async fn demo() {
//! use reprise_testkit::pty::{CommandBuilder, Pty};
//! let mut command = CommandBuilder::new("my-program");
//! command.env("TERM", "xterm-256color");
//! let mut pty = Pty::spawn(command);
//! pty.wait_text("ready").await;
//! pty.line("quit");
//! assert!(pty.wait_exit().await);
//! # }
//! ```

use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use portable_pty::CommandBuilder;
use portable_pty::{Child, MasterPty, PtySize, native_pty_system};

/// How long a wait lasts before the test fails. Generous: machines are shared; this
/// only bounds a hung test, it measures nothing.
const PATIENCE: Duration = Duration::from_secs(30);

const ROWS: u16 = 24;
const COLS: u16 = 80;

/// A running program attached to a pseudo-terminal.
pub struct Pty {
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every byte the program wrote to the terminal so far.
    written: Arc<AtomicU64>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    /// The program; killed when the `Pty` is dropped.
    pub child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
}

/// Locks a mutex even if a panicking thread poisoned it: the data is a screen or a
/// writer, still usable for showing what happened.
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The value of a setup step, or a panic naming the step.
fn setup<T, E: std::fmt::Display>(step: &str, result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("pty: cannot {step}: {error}"),
    }
}

/// How the terminal answers a cursor-position query (`ESC [ 6 n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorAnswers {
    /// At once, as a real terminal does.
    AtOnce,
    /// Never (a multiplexer that swallows the query).
    Never,
    /// After this long (a slow pseudo-terminal, a multiplexer under load).
    After(Duration),
}

impl Pty {
    /// Starts `command` in a new 80×24 pseudo-terminal. Panics when it cannot.
    pub fn spawn(command: CommandBuilder) -> Pty {
        Pty::spawn_answering(command, CursorAnswers::AtOnce)
    }

    /// [`Pty::spawn`], with cursor-position queries answered as `answers` says.
    pub fn spawn_answering(command: CommandBuilder, answers: CursorAnswers) -> Pty {
        let pair = setup(
            "open a pseudo-terminal",
            native_pty_system().openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            }),
        );
        let child = setup("start the program", pair.slave.spawn_command(command));
        drop(pair.slave);
        let mut reader = setup("read the terminal", pair.master.try_clone_reader());
        let writer = Arc::new(Mutex::new(setup(
            "write to the terminal",
            pair.master.take_writer(),
        )));
        let answer = Arc::clone(&writer);
        let (Some(rows), Some(cols)) = (NonZeroU16::new(ROWS), NonZeroU16::new(COLS)) else {
            unreachable!("the screen size is a non-zero constant");
        };
        let screen = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
        let feed = Arc::clone(&screen);
        let written = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&written);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        count.fetch_add(n as u64, Ordering::Relaxed);
                        let mut parser = lock(&feed);
                        parser.process(&buffer[..n]);
                        let queries = buffer[..n].windows(4).filter(|w| w == b"\x1b[6n").count();
                        for _ in 0..queries {
                            let (row, col) = parser.screen().cursor_position();
                            let reply = format!("\x1b[{};{}R", row + 1, col + 1);
                            let answer = Arc::clone(&answer);
                            let send = move || {
                                let mut writer = lock(&answer);
                                let _ = writer.write_all(reply.as_bytes());
                                let _ = writer.flush();
                            };
                            match answers {
                                CursorAnswers::AtOnce => send(),
                                CursorAnswers::Never => {}
                                CursorAnswers::After(delay) => {
                                    std::thread::spawn(move || {
                                        std::thread::sleep(delay);
                                        send();
                                    });
                                }
                            }
                        }
                    }
                }
            }
        });
        Pty {
            screen,
            written,
            writer,
            child,
            _master: pair.master,
        }
    }

    /// How many bytes the program wrote to the terminal so far.
    pub fn bytes_written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// The text on the screen now, rows joined by newlines.
    pub fn contents(&self) -> String {
        lock(&self.screen).screen().contents()
    }

    /// Types `bytes` (escape sequences included). Panics when the terminal is gone.
    pub fn send(&mut self, bytes: &str) {
        let mut writer = lock(&self.writer);
        setup("type into the terminal", writer.write_all(bytes.as_bytes()));
        setup("type into the terminal", writer.flush());
    }

    /// Types a line and presses Enter.
    pub fn line(&mut self, text: &str) {
        self.send(text);
        self.send("\r");
    }

    /// Waits until the screen satisfies `check`; panics with the screen after 30 s.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) {
        self.wait_for_within(PATIENCE, what, check).await;
    }

    /// [`Pty::wait_for`] with a patience of `limit`: for a program that waits on a
    /// model answering on a CPU, which a busy machine slows down a lot.
    pub async fn wait_for_within(&self, limit: Duration, what: &str, check: impl Fn(&str) -> bool) {
        let start = std::time::Instant::now();
        loop {
            let contents = self.contents();
            if check(&contents) {
                return;
            }
            if start.elapsed() > limit {
                panic!("waited for {what}; the screen shows:\n{contents}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `text` is on the screen.
    pub async fn wait_text(&self, text: &str) {
        self.wait_for(text, |screen| screen.contains(text)).await;
    }

    /// Waits for the program to exit; returns whether it exited successfully.
    pub async fn wait_exit(&mut self) -> bool {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = setup("ask whether the program exited", self.child.try_wait()) {
                return status.success();
            }
            if start.elapsed() > PATIENCE {
                panic!(
                    "the program did not exit; the screen shows:\n{}",
                    self.contents()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
