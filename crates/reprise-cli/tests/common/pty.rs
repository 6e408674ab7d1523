//! The real binary in a pseudo-terminal, its screen kept by a vt100 parser.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

/// How long a test waits for something to appear before failing. Generous: the
/// machine is shared; this only bounds a hung test, it measures nothing.
const PATIENCE: Duration = Duration::from_secs(30);

pub struct Pty {
    screen: Arc<Mutex<vt100::Parser>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    pub child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
}

impl Pty {
    pub fn spawn(cwd: &Path, args: &[&str]) -> Pty {
        let system = native_pty_system();
        let pair = system
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_reprise"));
        command.args(args);
        command.cwd(cwd);
        command.env("TERM", "xterm-256color");
        command.env("TZ", "UTC");
        command.env("XDG_CONFIG_HOME", cwd.join("xdg"));
        for name in [
            "REPRISE_BASE_URL",
            "REPRISE_MODEL",
            "REPRISE_RUNS_DIR",
            "REPRISE_CONFIG",
            "OPENAI_API_KEY",
        ] {
            command.env_remove(name);
        }
        let child = pair.slave.spawn_command(command).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = Arc::new(Mutex::new(pair.master.take_writer().unwrap()));
        let answer = Arc::clone(&writer);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::new(24).unwrap(),
            std::num::NonZeroU16::new(80).unwrap(),
            0,
        )));
        let feed = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut parser = feed.lock().unwrap();
                        parser.process(&buffer[..n]);
                        // Answer cursor-position queries (the inline mode asks where
                        // the cursor is), as a real terminal would.
                        let queries = buffer[..n].windows(4).filter(|w| w == b"\x1b[6n").count();
                        for _ in 0..queries {
                            let (row, col) = parser.screen().cursor_position();
                            let reply = format!("\x1b[{};{}R", row + 1, col + 1);
                            let mut writer = answer.lock().unwrap();
                            let _ = writer.write_all(reply.as_bytes());
                            let _ = writer.flush();
                        }
                    }
                }
            }
        });
        Pty {
            screen,
            writer,
            child,
            _master: pair.master,
        }
    }

    pub fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    pub fn send(&mut self, bytes: &str) {
        let mut writer = self.writer.lock().unwrap();
        writer.write_all(bytes.as_bytes()).unwrap();
        writer.flush().unwrap();
    }

    /// Types a line and presses Enter.
    pub fn line(&mut self, text: &str) {
        self.send(text);
        self.send("\r");
    }

    /// Waits until the screen satisfies `check`.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) {
        let start = std::time::Instant::now();
        loop {
            let contents = self.contents();
            if check(&contents) {
                return;
            }
            if start.elapsed() > PATIENCE {
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
            if let Some(status) = self.child.try_wait().unwrap() {
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
