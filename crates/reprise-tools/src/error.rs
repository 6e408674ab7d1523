//! What can go wrong in a built-in tool. Every error names a path as the model gave
//! it, never as it lies on the machine: the absolute path would tell the model (and
//! the logs) about the machine.

use std::io;

/// A file tool's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path is empty.
    #[error("the path is empty: give a path relative to the working folder")]
    Empty,
    /// The path is absolute and not inside the working folder.
    #[error("{path}: give a path relative to the working folder")]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path goes up with `..`.
    #[error("{path}: paths may not go up with ..")]
    GoesUp {
        /// The path as given.
        path: String,
    },
    /// Resolving the path left the working folder (a symbolic link pointing out).
    #[error("{path}: the path leads out of the working folder (through a symbolic link)")]
    LeadsOut {
        /// The path as given.
        path: String,
    },
    /// The path lies in a folder the tools must not touch (the runs folder).
    #[error("{path}: the path lies in the runs folder, which the tools do not touch")]
    Protected {
        /// The path as given.
        path: String,
    },
    /// The path names something that is not a regular file (a folder, a FIFO, a device).
    #[error("{path}: not a regular file but {what}")]
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is instead.
        what: &'static str,
    },
    /// The file to edit is too large to be edited whole.
    #[error("{path}: the file has {size} bytes; files over {limit} bytes are not edited")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The largest file edited.
        limit: u64,
    },
    /// The content to write is larger than the largest write allowed.
    #[error(
        "{path}: the content has {size} bytes, more than the largest write ({limit} bytes): \
         nothing was written"
    )]
    TooLargeToWrite {
        /// The path as given.
        path: String,
        /// The content's size.
        size: u64,
        /// The largest write.
        limit: u64,
    },
    /// The file to edit is not UTF-8 text.
    #[error("{path}: not UTF-8 text")]
    NotText {
        /// The path as given.
        path: String,
    },
    /// The text to replace is empty.
    #[error("{path}: the text to replace (old) is empty")]
    EmptyOld {
        /// The path as given.
        path: String,
    },
    /// The text to replace does not occur exactly once.
    #[error(
        "{path}: the text to replace (old) occurs {count} times; it must occur exactly once \
         (give more of the text around it)"
    )]
    NotUnique {
        /// The path as given.
        path: String,
        /// How often it occurs.
        count: usize,
    },
    /// The text to replace does not occur.
    #[error("{path}: the text to replace (old) does not occur in the file")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A system call failed.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl FileError {
    /// An I/O error about `path` as the model gave it.
    pub(crate) fn io(path: &str, source: impl Into<io::Error>) -> FileError {
        FileError::Io {
            path: path.to_owned(),
            source: source.into(),
        }
    }
}

/// A failure of `run_command` before or around the command itself (a command that
/// runs and fails is a result, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The command text is empty.
    #[error("the command is empty")]
    Empty,
    /// The command text holds a NUL byte, which no shell can be given.
    #[error("the command holds a NUL byte")]
    Nul,
    /// The sandbox could not be set up.
    #[error("cannot set up the sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    /// The shell could not be started.
    #[error("cannot start sh: {source}")]
    Spawn {
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// A failure to build or apply the Landlock rules.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A folder the command may write to could not be opened.
    #[error("{path}: {source}")]
    Folder {
        /// The folder (the working folder's name for itself is `.`).
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused the rules.
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The sandbox trampoline could not be started.
    #[error("cannot start the sandbox trampoline {program}: {source}")]
    Trampoline {
        /// The program named in the settings.
        program: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The sandbox trampoline could not set up its namespaces, mounts or shell.
    #[error("{step}: {source}")]
    Namespace {
        /// What it was doing.
        step: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The sandbox trampoline was started with arguments it does not understand
    /// (by something other than `run_command`).
    #[error("not started by run_command: {message}")]
    TrampolineArguments {
        /// What is wrong with them.
        message: String,
    },
    /// The seccomp filter that keeps set-id bits off files could not be built.
    #[error("seccomp filter: {0}")]
    Seccomp(#[source] seccompiler::BackendError),
    /// The kernel refused the seccomp filter.
    #[error("seccomp: {0}")]
    SeccompApply(#[source] seccompiler::Error),
    /// The capability to set file capabilities could not be dropped.
    #[error("cannot drop CAP_SETFCAP: {source}")]
    Capabilities {
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The limits on processes and memory could not be set.
    #[error("cannot set the limits on processes and memory: {source}")]
    Limits {
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The thread that starts the command in the sandbox could not be started, or
    /// went away.
    #[error("cannot start the sandboxed thread: {source}")]
    Thread {
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// Why the body of a JSON string literal is not valid JSON string text. `at` is the
/// byte offset in the body (after the opening quote) where the fault begins.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EscapeError {
    /// A backslash followed by something that is no JSON escape.
    #[error("invalid escape \\{} at byte {at}", shown_byte(*escape))]
    InvalidEscape {
        /// The byte after the backslash.
        escape: u8,
        /// Where the escape begins.
        at: u64,
    },
    /// A `\u` not followed by four hexadecimal digits.
    #[error("invalid \\u escape at byte {at}: four hexadecimal digits must follow")]
    BadHex {
        /// Where the escape begins.
        at: u64,
    },
    /// A `\u` escape of a UTF-16 surrogate without its other half.
    #[error("lone surrogate \\u{unit:04X} at byte {at}: a surrogate pair must be whole")]
    LoneSurrogate {
        /// The surrogate.
        unit: u32,
        /// Where its escape begins.
        at: u64,
    },
    /// A control character that JSON wants escaped.
    #[error("control character 0x{code:02X} at byte {at}: JSON text must escape it")]
    Control {
        /// The character.
        code: u8,
        /// Where it is.
        at: u64,
    },
    /// A quote that would have ended the string.
    #[error("unescaped quote at byte {at}")]
    Quote {
        /// Where it is.
        at: u64,
    },
    /// The text ends inside an escape.
    #[error("the text ends inside the escape at byte {at}")]
    Unfinished {
        /// Where the escape begins.
        at: u64,
    },
}

/// A byte as it may be shown: itself when printable ASCII, else its hex value.
fn shown_byte(byte: u8) -> String {
    if byte.is_ascii_graphic() {
        char::from(byte).to_string()
    } else {
        format!("(byte 0x{byte:02X})")
    }
}

/// Why unescaping a JSON string literal into a writer stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnescapeError {
    /// The literal is not valid JSON string text.
    #[error(transparent)]
    Escape(#[from] EscapeError),
    /// Writing the text failed.
    #[error(transparent)]
    Write(#[from] io::Error),
}
