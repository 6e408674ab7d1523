//! The terminal backend of the chat: crossterm's, except that a cursor position the
//! terminal does not report in time (tmux, screen, a slow pseudo-terminal) is not
//! an error. The inline viewport asks where the cursor is when it starts, when the
//! terminal is resized and when it is cleared; without an answer it is placed at
//! the bottom of the screen, and the terminal is not asked again.

use std::io::Stdout;

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

/// The chat's terminal.
pub type ChatTerminal = ratatui::Terminal<FallbackCursor>;

/// Crossterm's backend, with a cursor position to fall back on.
pub struct FallbackCursor {
    inner: CrosstermBackend<Stdout>,
    /// Where the cursor was last put or reported.
    known: Option<Position>,
    /// Whether the terminal failed to report the cursor's position once: it is not
    /// asked again (each question costs seconds, and a late answer is typed into
    /// whatever reads the terminal next).
    unanswered: bool,
}

impl Default for FallbackCursor {
    /// Crossterm's backend on stdout.
    fn default() -> FallbackCursor {
        FallbackCursor {
            inner: CrosstermBackend::new(std::io::stdout()),
            known: None,
            unanswered: false,
        }
    }
}

impl FallbackCursor {
    /// Whether a question about the cursor's position went unanswered (its answer
    /// may still arrive).
    pub fn had_unanswered_question(&self) -> bool {
        self.unanswered
    }
}

impl Backend for FallbackCursor {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        if !self.unanswered {
            match self.inner.get_cursor_position() {
                Ok(position) => {
                    self.known = Some(position);
                    return Ok(position);
                }
                Err(_) => self.unanswered = true,
            }
        }
        if let Some(position) = self.known {
            return Ok(position);
        }
        // The bottom row: the viewport then scrolls the shell's lines up above it.
        let size = self.inner.size()?;
        Ok(Position::new(0, size.height.saturating_sub(1)))
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        let position = position.into();
        self.known = Some(position);
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }

    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()
    }
}

/// Sets up the terminal as `ratatui::try_init` (full screen) or
/// `ratatui::try_init_with_options` (inline) does, with the fallback backend.
pub fn init(inline: Option<u16>) -> std::io::Result<ChatTerminal> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        ratatui::restore();
        hook(info);
    }));
    crossterm::terminal::enable_raw_mode()?;
    match inline {
        Some(height) => ratatui::Terminal::with_options(
            FallbackCursor::default(),
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Inline(height),
            },
        ),
        None => {
            crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)?;
            ratatui::Terminal::new(FallbackCursor::default())
        }
    }
}

/// Reads what the terminal sent and nobody asked for, for a moment: a late answer
/// to a cursor question, which would otherwise reach the shell as typed text
/// (`^[[19;4R`).
pub fn drain_late_answers() {
    let wait = std::time::Duration::from_millis(200);
    while crossterm::event::poll(wait).unwrap_or(false) {
        let _ = crossterm::event::read();
    }
}
