//! The walk of the working folder: which paths a checkpoint captures, with their
//! file status, and a count of what it leaves out.
//!
//! Folders are read through handles opened without following links (see
//! [`Folder`]). Left out: `.git` (at any depth), the excluded paths (the runs folder,
//! the store), what `.gitignore` files and `.git/info/exclude` ignore (git's rules,
//! with ripgrep's matcher, whether or not the folder is a git repository; the global
//! excludes file of the person's git config is not read, so the same folder captures
//! the same way for everyone), files over the size limit and special files (FIFOs,
//! sockets, devices). A folder this user may not read is one entry marked not
//! captured.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;

use crate::error::{CheckpointError, io_err};
use crate::folder::Folder;
use crate::tree::Kind;

/// The longest `.gitignore` read; a longer one is read up to this size.
const GITIGNORE_LIMIT: u64 = 4 << 20;

/// What a file's status says about its content: equal status, same content (with
/// the racy-time rule the stat cache applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileStat {
    pub(crate) size: u64,
    pub(crate) mtime: (i64, u32),
    pub(crate) ctime: (i64, u32),
    pub(crate) ino: u64,
    pub(crate) mode: u32,
}

impl FileStat {
    pub(crate) fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime: (stat.st_mtime, nanos(stat.st_mtime_nsec)),
            ctime: (stat.st_ctime, nanos(stat.st_ctime_nsec)),
            ino: stat.st_ino,
            mode: stat.st_mode,
        }
    }
}

fn nanos<T: TryInto<u32>>(value: T) -> u32 {
    value.try_into().unwrap_or(0)
}

/// A path the checkpoint captures.
pub(crate) struct Scanned {
    /// Relative to the folder's root.
    pub(crate) path: PathBuf,
    /// File, executable file or link.
    pub(crate) kind: Kind,
    pub(crate) stat: FileStat,
    /// The file's device and how many names it has: the files of one device and
    /// inode with more than one name are hard-linked together.
    pub(crate) dev: u64,
    pub(crate) nlink: u64,
}

/// What a walk found.
#[derive(Default)]
pub(crate) struct Scan {
    pub(crate) entries: Vec<Scanned>,
    /// Paths `.gitignore` rules left out (an ignored folder counts once).
    pub(crate) ignored: u64,
    /// Files over the size limit.
    pub(crate) large: u64,
    /// FIFOs, sockets, devices.
    pub(crate) special: u64,
}

/// The ignore rules in force in one folder: its own `.gitignore` and its parents'.
struct Rules {
    own: Option<Gitignore>,
    parent: Option<Arc<Rules>>,
}

impl Rules {
    fn ignores(&self, path: &Path, is_dir: bool) -> bool {
        let mut rules = Some(self);
        while let Some(level) = rules {
            if let Some(gitignore) = &level.own {
                let matched = gitignore.matched(path, is_dir);
                if matched.is_ignore() {
                    return true;
                }
                if matched.is_whitelist() {
                    return false;
                }
            }
            rules = level.parent.as_deref();
        }
        false
    }
}

/// What a walk leaves out besides ignored files.
pub(crate) struct ScanLimits<'a> {
    /// Files larger than this are not captured.
    pub(crate) max_file_size: u64,
    /// Paths relative to the root that are not captured, nor walked into.
    pub(crate) exclude: &'a [PathBuf],
}

/// A folder still to read, with the rules in force above it.
type Pending = (PathBuf, Arc<Rules>);

/// Walks `folder`, on two threads sharing the folders still to read (as `git
/// status` reads file status on several threads).
pub(crate) fn scan(folder: &Folder, limits: &ScanLimits<'_>) -> Result<Scan, CheckpointError> {
    let exclude = read_rules(folder, Path::new(".git/info"), "exclude", None)?;
    let top = Arc::new(Rules {
        own: exclude,
        parent: None,
    });
    let pending: Mutex<Vec<Pending>> = Mutex::new(vec![(PathBuf::new(), top)]);
    let busy = AtomicUsize::new(0);
    let work = || -> Result<Scan, CheckpointError> {
        let mut walker = Walker {
            folder,
            limits,
            scan: Scan::default(),
            found: Vec::new(),
        };
        loop {
            let next = {
                let mut queue = pending.lock().unwrap_or_else(PoisonError::into_inner);
                let next = queue.pop();
                if next.is_some() {
                    busy.fetch_add(1, Ordering::SeqCst);
                }
                next
            };
            let Some((dir_rel, rules)) = next else {
                if busy.load(Ordering::SeqCst) == 0 {
                    return Ok(walker.scan);
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
                continue;
            };
            let result = walker.scan_dir(&dir_rel, rules);
            pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .append(&mut walker.found);
            busy.fetch_sub(1, Ordering::SeqCst);
            result?;
        }
    };
    let (mine, theirs) = std::thread::scope(|scope| {
        let other = scope.spawn(work);
        let mine = work();
        let theirs = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    });
    let mut scan = mine?;
    let theirs = theirs?;
    scan.entries.extend(theirs.entries);
    scan.ignored += theirs.ignored;
    scan.large += theirs.large;
    scan.special += theirs.special;
    Ok(scan)
}

/// One thread's part of a walk: what it read, and the subfolders it found that
/// are still to read.
struct Walker<'a> {
    folder: &'a Folder,
    limits: &'a ScanLimits<'a>,
    scan: Scan,
    found: Vec<Pending>,
}

impl Walker<'_> {
    /// Reads the folder `dir_rel` into `scan`; its subfolders go to `found`. A
    /// folder below the root that this user may not read (or whose entries it may
    /// not stat) becomes one [`Kind::Unreadable`] entry: nothing in it is captured,
    /// nor touched by a restore.
    fn scan_dir(
        &mut self,
        dir_rel: &Path,
        parent_rules: Arc<Rules>,
    ) -> Result<(), CheckpointError> {
        let scan = &self.scan;
        let (entries, pending) = (scan.entries.len(), self.found.len());
        let counts = (scan.ignored, scan.large, scan.special);
        match self.read_dir_entries(dir_rel, parent_rules) {
            Err(error) if is_denied(&error) && !dir_rel.as_os_str().is_empty() => {
                // What was read of it before the error goes with it.
                self.found.truncate(pending);
                let scan = &mut self.scan;
                scan.entries.truncate(entries);
                (scan.ignored, scan.large, scan.special) = counts;
                scan.entries.push(Scanned {
                    path: dir_rel.to_path_buf(),
                    kind: Kind::Unreadable,
                    stat: FileStat::default(),
                    dev: 0,
                    nlink: 0,
                });
                Ok(())
            }
            other => other,
        }
    }

    /// The entries of the folder `dir_rel`, read into `scan` and `found`.
    fn read_dir_entries(
        &mut self,
        dir_rel: &Path,
        parent_rules: Arc<Rules>,
    ) -> Result<(), CheckpointError> {
        let (folder, limits, scan) = (self.folder, self.limits, &mut self.scan);
        let dir = match folder.open_dir(dir_rel) {
            Ok(dir) => dir,
            // Removed or replaced while walking: what is not there is not captured.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) if !dir_rel.as_os_str().is_empty() => {
                return Ok(());
            }
            Err(errno) => return Err(io_err("open", &folder.display_path(dir_rel))(errno)),
        };
        let rules = match read_rules(folder, dir_rel, ".gitignore", Some(&dir))? {
            Some(own) => Arc::new(Rules {
                own: Some(own),
                parent: Some(parent_rules),
            }),
            None => parent_rules,
        };
        let display = folder.display_path(dir_rel);
        let entries = rustix::fs::Dir::read_from(&dir).map_err(io_err("read", &display))?;
        for entry in entries {
            let entry = entry.map_err(io_err("read", &display))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || name == ".git" {
                continue;
            }
            let rel = dir_rel.join(name);
            if limits.exclude.contains(&rel) {
                continue;
            }
            let mut file_type = entry.file_type();
            let mut stat = None;
            if file_type == FileType::Unknown {
                let Some(lstat) = stat_entry(&dir, name, folder, &rel)? else {
                    continue;
                };
                file_type = FileType::from_raw_mode(lstat.st_mode);
                stat = Some(lstat);
            }
            let is_dir = file_type == FileType::Directory;
            if rules.ignores(&rel, is_dir) {
                scan.ignored += 1;
                continue;
            }
            match file_type {
                FileType::Directory => self.found.push((rel, Arc::clone(&rules))),
                FileType::RegularFile | FileType::Symlink => {
                    let stat = match stat {
                        Some(stat) => stat,
                        None => match stat_entry(&dir, name, folder, &rel)? {
                            Some(stat) => stat,
                            None => continue,
                        },
                    };
                    // `nlink_t` is 32 bits on some targets (aarch64).
                    #[allow(clippy::useless_conversion)]
                    let (dev, nlink) = (stat.st_dev, u64::from(stat.st_nlink));
                    let stat = FileStat::of(&stat);
                    let kind = if file_type == FileType::Symlink {
                        Kind::Link
                    } else if stat.size > limits.max_file_size {
                        scan.large += 1;
                        continue;
                    } else if stat.mode & 0o100 != 0 {
                        Kind::Exec
                    } else {
                        Kind::File
                    };
                    scan.entries.push(Scanned {
                        path: rel,
                        kind,
                        stat,
                        dev,
                        nlink,
                    });
                }
                _ => scan.special += 1,
            }
        }
        Ok(())
    }
}

/// Whether `error` says this user may not read something.
pub(crate) fn is_denied(error: &CheckpointError) -> bool {
    matches!(
        error,
        CheckpointError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied
    )
}

/// `lstat` of the entry `name` of `dir`; `None` when it is gone.
fn stat_entry(
    dir: &rustix::fd::OwnedFd,
    name: &OsStr,
    folder: &Folder,
    rel: &Path,
) -> Result<Option<rustix::fs::Stat>, CheckpointError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(io_err("stat", &folder.display_path(rel))(errno)),
    }
}

/// The rules of the ignore file `name` in `dir_rel` (`dir`: a handle on it when
/// open); `None` when there is none. A link is not read as an ignore file, as git
/// does not; a pattern that does not parse is skipped, as git skips it.
fn read_rules(
    folder: &Folder,
    dir_rel: &Path,
    name: &str,
    dir: Option<&rustix::fd::OwnedFd>,
) -> Result<Option<Gitignore>, CheckpointError> {
    let rel = dir_rel.join(name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let opened = match dir {
        Some(dir) => rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty()),
        None => folder.open_at(&rel, flags),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::ISDIR) => return Ok(None),
        Err(errno) => return Err(io_err("open", &folder.display_path(&rel))(errno)),
    };
    let mut text = Vec::new();
    std::fs::File::from(fd)
        .take(GITIGNORE_LIMIT)
        .read_to_end(&mut text)
        .map_err(io_err("read", &folder.display_path(&rel)))?;
    // Paths are matched relative to the folder's root, so the rules' root is too.
    let base = if name == "exclude" {
        PathBuf::new()
    } else {
        dir_rel.to_path_buf()
    };
    let mut builder = GitignoreBuilder::new(base);
    for line in String::from_utf8_lossy(&text).lines() {
        // A pattern git would skip is skipped here too.
        drop(builder.add_line(None, line));
    }
    match builder.build() {
        Ok(gitignore) => Ok(Some(gitignore)),
        Err(_) => Ok(None),
    }
}
