//! Hard links: the captured files that are one file under several names, recorded
//! with each checkpoint (a links object its record names), and made so again by a
//! restore, which also gives a file its own inode where the target has it apart.
//!
//! The object is the magic line `reprise-links 1\n`, then per group its paths
//! (relative to the working folder), each followed by a NUL, and one more NUL
//! ending the group. Groups hold two paths or more, sorted; groups are sorted.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::apply::{TEMP_NAME, write_entry};
use crate::error::{CheckpointError, io_err};
use crate::folder::{Folder, split};
use crate::objects::Objects;
use crate::tree::{Flat, Kind};

const MAGIC: &[u8] = b"reprise-links 1\n";

/// Groups of paths hard-linked together.
pub(crate) type Links = Vec<Vec<PathBuf>>;

/// `found` in the recorded order: groups of two or more, each sorted, sorted.
pub(crate) fn groups(found: Vec<Vec<PathBuf>>) -> Links {
    let mut out: Links = found
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|mut group| {
            group.sort();
            group
        })
        .collect();
    out.sort();
    out
}

/// The bytes of the links object of `links`.
pub(crate) fn encode(links: &Links) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for group in links {
        for path in group {
            out.extend_from_slice(path.as_os_str().as_bytes());
            out.push(0);
        }
        out.push(0);
    }
    out
}

/// The groups of the links object `bytes`.
pub(crate) fn decode(bytes: &[u8]) -> Result<Links, &'static str> {
    let mut rest = bytes.strip_prefix(MAGIC).ok_or("not a links object")?;
    let mut out = Links::new();
    let mut group = Vec::new();
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("unterminated path")?;
        let path = &rest[..end];
        rest = &rest[end + 1..];
        if path.is_empty() {
            if group.len() < 2 {
                return Err("a group of fewer than two paths");
            }
            out.push(std::mem::take(&mut group));
            continue;
        }
        let path = PathBuf::from(OsStr::from_bytes(path));
        if path.is_absolute()
            || path
                .components()
                .any(|part| !matches!(part, std::path::Component::Normal(_)))
        {
            return Err("a path that is not below the folder");
        }
        group.push(path);
    }
    if !group.is_empty() {
        return Err("unterminated group");
    }
    Ok(out)
}

/// What a restore does to links: paths linked to the first of their group, and
/// paths given an inode of their own.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkPlan {
    /// `(path, the path it is linked to)`.
    pub(crate) join: Vec<(PathBuf, PathBuf)>,
    /// Paths linked now to a file the target has apart from them.
    pub(crate) split: Vec<PathBuf>,
}

/// What going from `current` (its files and links) to `target` does to links.
/// `touchable`: whether the restore may change a path (a file in the target,
/// neither kept nor left alone). A rewritten file (`rewritten`) has lost its links.
pub(crate) fn plan(
    current: &Links,
    target: &Links,
    target_files: &Flat,
    touchable: &dyn Fn(&Path) -> bool,
    rewritten: &HashSet<PathBuf>,
) -> LinkPlan {
    let eligible = |path: &Path| {
        matches!(target_files.get(path), Some((Kind::File | Kind::Exec, _))) && touchable(path)
    };
    let target_group: HashMap<&Path, usize> = index(target);
    let mut plan = LinkPlan::default();
    for group in current {
        let mut first_key = None;
        for path in group.iter().filter(|path| eligible(path)) {
            let key = target_group.get(path.as_path()).copied();
            match first_key {
                None => first_key = Some(key),
                Some(first) if first == key && key.is_some() => {}
                // Named even when restoring its content gives it a file of its own.
                Some(_) => plan.split.push(path.clone()),
            }
        }
    }
    let current_group: HashMap<&Path, usize> = index(current);
    for group in target {
        let id = |path: &Path| target_files.get(path).map(|(_, id)| *id);
        let mut members = group.iter().filter(|path| eligible(path));
        let Some(primary) = members.next() else {
            continue;
        };
        for member in members.filter(|member| id(member) == id(primary)) {
            let together = current_group.contains_key(member.as_path())
                && current_group.get(member.as_path()) == current_group.get(primary.as_path());
            let intact = !rewritten.contains(member)
                && !rewritten.contains(primary)
                && !plan.split.contains(member)
                && !plan.split.contains(primary);
            if !(together && intact) {
                plan.join.push((member.clone(), primary.clone()));
            }
        }
    }
    plan.split.sort();
    plan
}

fn index(links: &Links) -> HashMap<&Path, usize> {
    links
        .iter()
        .enumerate()
        .flat_map(|(at, group)| group.iter().map(move |path| (path.as_path(), at)))
        .collect()
}

/// Carries out `plan` after the files were restored: each path to split that is
/// still linked rewritten from its object (its own inode), then each path to join linked to the first of
/// its group, unless it already is one file with it. Idempotent.
pub(crate) fn apply(
    folder: &Folder,
    objects: &Objects,
    target_files: &Flat,
    plan: &LinkPlan,
) -> Result<(), CheckpointError> {
    if plan.join.is_empty() && plan.split.is_empty() {
        return Ok(());
    }
    for path in &plan.split {
        let Some(&(kind, id)) = target_files.get(path) else {
            continue;
        };
        let (parent, name) = split(path);
        let display = folder.display_path(path);
        let dir = folder
            .open_dir(parent)
            .map_err(io_err("open", &folder.display_path(parent)))?;
        let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => continue,
            Err(errno) => return Err(io_err("stat", &display)(errno)),
        };
        if stat.st_nlink > 1 {
            write_entry(
                &dir,
                name,
                kind,
                &id,
                objects,
                Some(stat.st_mode & 0o7777),
                &display,
            )?;
        }
    }
    for (member, primary) in &plan.join {
        let (from_parent, from_name) = split(primary);
        let (to_parent, to_name) = split(member);
        let display = folder.display_path(member);
        let from_dir = folder
            .open_dir(from_parent)
            .map_err(io_err("open", &folder.display_path(from_parent)))?;
        let to_dir = folder
            .open_dir(to_parent)
            .map_err(io_err("open", &folder.display_path(to_parent)))?;
        let from_stat = rustix::fs::statat(&from_dir, from_name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(io_err("stat", &folder.display_path(primary)))?;
        if let Ok(to_stat) = rustix::fs::statat(&to_dir, to_name, AtFlags::SYMLINK_NOFOLLOW)
            && (to_stat.st_dev, to_stat.st_ino) == (from_stat.st_dev, from_stat.st_ino)
        {
            continue;
        }
        match rustix::fs::unlinkat(&to_dir, TEMP_NAME, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(errno) => return Err(io_err("remove", &display.with_file_name(TEMP_NAME))(errno)),
        }
        rustix::fs::linkat(&from_dir, from_name, &to_dir, TEMP_NAME, AtFlags::empty())
            .map_err(io_err("link", &display))?;
        rustix::fs::renameat(&to_dir, TEMP_NAME, &to_dir, to_name)
            .map_err(io_err("rename", &display))?;
    }
    rustix::fs::syncfs(folder.root()).map_err(io_err("sync", folder.path()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn links_decode_to_what_was_encoded_and_damage_is_refused() {
        let links = groups(vec![
            vec!["b/y".into(), "a".into()],
            vec!["only".into()],
            vec!["c".into(), "d".into(), "e/f".into()],
        ]);
        assert_eq!(links.len(), 2);
        let bytes = encode(&links);
        assert_eq!(decode(&bytes).unwrap(), links);
        assert!(decode(b"reprise-links 1\na\0\0").is_err());
        assert!(decode(b"reprise-links 1\na\0b\0").is_err());
        assert!(decode(b"reprise-links 1\n/a\0b\0\0").is_err());
        assert!(decode(b"reprise-links 1\n../a\0b\0\0").is_err());
        assert!(decode(b"links").is_err());
    }
}
