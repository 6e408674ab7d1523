//! Helpers: a folder's state as a map, and writing files.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Every file and link below `root` but `.git` and `.run`: path → `f <sha256>`,
/// `x <sha256>` (executable) or `l <target>`.
pub fn state(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let walk = walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|entry| {
            let name = entry.file_name();
            !(entry.depth() >= 1 && (name == ".git" || (entry.depth() == 1 && name == ".run")))
        });
    for entry in walk {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let kind = entry.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path()).unwrap();
            out.insert(rel, format!("l {}", target.display()));
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path()).unwrap();
            let exec = entry.metadata().unwrap().permissions().mode() & 0o100 != 0;
            let hash = Sha256::digest(&bytes);
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            out.insert(rel, format!("{} {hex}", if exec { "x" } else { "f" }));
        } else if kind.is_dir() && std::fs::read_dir(entry.path()).unwrap().next().is_none() {
            out.insert(rel, "empty dir".to_owned());
        }
    }
    out
}

/// The same, without the paths `skip` (ignored or large files a test left on purpose).
pub fn state_without(root: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    let mut all = state(root);
    all.retain(|path, _| {
        !skip
            .iter()
            .any(|s| path == s || path.starts_with(&format!("{s}/")))
    });
    all
}

/// Every file below `dir` with its bytes and its modification time: to tell that
/// nothing wrote there.
pub fn snapshot_bytes(dir: &Path) -> BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = entry.path().symlink_metadata().unwrap();
        let bytes = if meta.is_file() {
            std::fs::read(entry.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(rel, (bytes, meta.modified().unwrap()));
    }
    out
}

/// Writes `content` to `root/rel`, creating its folders.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Runs a program in `dir`, failing the test when it fails.
pub fn run(dir: &Path, program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?} failed");
}

/// An object of a store, read as docs/format.md describes the store.
#[derive(Debug)]
pub struct StoredObject {
    /// Its name, in hexadecimal.
    pub id: String,
    /// Its content.
    pub content: Vec<u8>,
    /// Whether it is stored as a zstd frame.
    pub compressed: bool,
    /// The file holding it: a pack or a loose object.
    pub file: std::path::PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The objects of every pack of `store`, in the order of the packs' names.
pub fn packed_objects(store: &Path) -> Vec<StoredObject> {
    let mut packs: Vec<_> = std::fs::read_dir(store.join("packs"))
        .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
        .unwrap_or_default();
    packs.sort();
    let mut out = Vec::new();
    for path in packs {
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"reprise-pack 1\n"), "{}", path.display());
        let trailer = &bytes[bytes.len() - 48..];
        let index_at = u64::from_le_bytes(trailer[..8].try_into().unwrap()) as usize;
        let count = u64::from_le_bytes(trailer[8..16].try_into().unwrap()) as usize;
        let index = &bytes[index_at..bytes.len() - 48];
        assert_eq!(index.len(), count * 53);
        assert_eq!(Sha256::digest(index).as_slice(), &trailer[16..]);
        for entry in index.chunks_exact(53) {
            let offset = u64::from_le_bytes(entry[32..40].try_into().unwrap()) as usize;
            let len = u32::from_le_bytes(entry[40..44].try_into().unwrap()) as usize;
            let compressed = entry[48] == 1;
            let stored = &bytes[offset..offset + len];
            let content = if compressed {
                zstd::decode_all(stored).unwrap()
            } else {
                stored.to_vec()
            };
            assert_eq!(hex(&Sha256::digest(&content)), hex(&entry[..32]));
            out.push(StoredObject {
                id: hex(&entry[..32]),
                content,
                compressed,
                file: path.clone(),
            });
        }
    }
    out
}

/// The loose objects of `store` (`objects/ab/cdef…`, `.zst` when compressed).
pub fn loose_objects(store: &Path) -> Vec<StoredObject> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(store.join("objects")).min_depth(2) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(store.join("objects")).unwrap();
        let name = rel.to_string_lossy().replace('/', "");
        let compressed = name.ends_with(".zst");
        let bytes = std::fs::read(entry.path()).unwrap();
        let content = if compressed {
            zstd::decode_all(bytes.as_slice()).unwrap()
        } else {
            bytes
        };
        out.push(StoredObject {
            id: name.trim_end_matches(".zst").to_owned(),
            content,
            compressed,
            file: entry.path().to_path_buf(),
        });
    }
    out
}

/// Every object of `store`, packed or loose.
pub fn all_objects(store: &Path) -> Vec<StoredObject> {
    let mut all = packed_objects(store);
    all.extend(loose_objects(store));
    all
}

/// Turns `store` into one as written before packs and compression: every object
/// a loose file of its content, no pack.
pub fn unpack_to_loose(store: &Path) {
    for object in all_objects(store) {
        let dir = store.join("objects").join(&object.id[..2]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&object.id[2..]), &object.content).unwrap();
        if object.file.starts_with(store.join("objects")) && object.compressed {
            std::fs::remove_file(&object.file).unwrap();
        }
    }
    std::fs::remove_dir_all(store.join("packs")).unwrap();
}
