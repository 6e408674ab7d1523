//! A throwaway PostgreSQL cluster: `initdb` and `pg_ctl` on a private socket directory
//! in a temp folder, no TCP port. As root (CI) the server runs as the `postgres` user,
//! since PostgreSQL refuses to run as root.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What to run when the server binaries are missing.
const INSTALL_HINT: &str = "run scripts/install-test-deps.sh postgres (or set \
    REPRISE_TEST_DATABASE_URL to a server the tests may create schemas on)";

/// A cluster of our own, stopped and removed on drop unless `leak`ed to a watchdog.
pub struct Cluster {
    bin: PathBuf,
    root: PathBuf,
    /// `runuser -u postgres --` as root, nothing otherwise.
    as_postgres: bool,
    stopped_on_drop: bool,
    /// Server settings passed on every start.
    settings: String,
}

impl Cluster {
    /// Creates and starts a cluster without fsync (tests crash clients, not the
    /// machine). Panics, naming the install script, when the server binaries cannot
    /// be found.
    pub fn start() -> Cluster {
        Self::start_with("-c fsync=off")
    }

    /// [`Self::start`] with the server settings given (`-c name=value …`).
    pub fn start_with(settings: &str) -> Cluster {
        let bin = server_bin_dir().unwrap_or_else(|| {
            panic!(
                "PostgreSQL server binaries (initdb, pg_ctl) are not on PATH nor in \
                 /usr/lib/postgresql/*/bin: {INSTALL_HINT}"
            )
        });
        let root = tempfile::Builder::new()
            .prefix("reprise-pg-")
            .tempdir()
            .unwrap()
            .keep();
        let as_postgres = rustix::process::geteuid().is_root();
        let cluster = Cluster {
            bin,
            root,
            as_postgres,
            stopped_on_drop: true,
            settings: settings.to_owned(),
        };
        std::fs::create_dir(cluster.socket_dir()).unwrap();
        if as_postgres {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres:")
                .arg(&cluster.root));
        }
        let data = cluster.data_dir();
        run(cluster
            .server_command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
            .args(["--no-sync", "--no-instructions"]));
        cluster.start_server();
        cluster
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("socket")
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// A URL for the `postgres` database as the `postgres` user, over the socket.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@localhost/postgres?host={}&port=5432",
            self.socket_dir().display()
        )
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start_server(&self) {
        let options = format!(
            "-k {} -c listen_addresses='' -p 5432 -c max_connections=400 {}",
            self.socket_dir().display(),
            self.settings
        );
        run(self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.root.join("server.log"))
            .args(["-w", "-o", &options, "start"]));
    }

    /// Stops the server (fast shutdown: sessions are cut, the data is kept).
    pub fn stop_server(&self) {
        run(self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-m", "fast", "stop"]));
    }

    /// Leaves stopping and removal to a watchdog process that does both once `pid`
    /// (this test process) has exited: a cluster shared by every test of the binary.
    pub fn stop_when_process_exits(mut self, pid: u32) {
        self.stopped_on_drop = false;
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = format!(
            "{} '{}' -D '{}' -m immediate stop",
            if self.as_postgres {
                "runuser -u postgres --"
            } else {
                ""
            },
            pg_ctl.display(),
            self.data_dir().display()
        );
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.2; done; {stop}; rm -rf '{}'",
            self.root.display()
        );
        // Its own process group: a signal to the test's group (a timeout, ^C) must
        // not take the watchdog with it. Never waited for: it outlives this process.
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .args(["-c", &script])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    }

    fn server_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.stopped_on_drop {
            let _ = self
                .server_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-m", "immediate", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory holding `initdb` and `pg_ctl`: on PATH, or Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest).
fn server_bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_both(&dir) {
                // Debian links them from elsewhere; keep the real directory so that
                // the server binary next to them is found.
                let real = std::fs::canonicalize(dir.join("initdb")).ok()?;
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}
