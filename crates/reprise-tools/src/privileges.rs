//! No privilege comes out of the sandbox: a command can give no file a set-user-id
//! or set-group-id bit, nor file capabilities, which would let anyone who runs the
//! file later act as the chat's user (root, when the chat runs as root).
//!
//! A seccomp filter makes the calls that set a mode (`chmod`, `fchmod`,
//! `fchmodat`, `fchmodat2`, and `open`, `openat`, `creat`, `mknod`, `mknodat` with
//! a mode) fail with `EPERM` when the mode holds `S_ISUID` or `S_ISGID`. The calls
//! whose mode a filter cannot see (`openat2` and `io_uring`, which take it in a
//! structure in memory) fail with `ENOSYS`, which the C library and the programs
//! that use them take as "not there" and fall back from. File capabilities are
//! written with `setxattr`, whose attribute name a filter cannot see either: the
//! capability that allows it (`CAP_SETFCAP`) is taken out of the bounding set, so
//! no program started afterwards has it.
//!
//! Like Landlock, the filter and the bounding set hold for the calling thread and
//! everything it starts afterwards: the sandbox's own thread, or the trampoline.

use std::collections::BTreeMap;

use rustix::io::Errno;
use rustix::thread::CapabilitySet;
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::error::SandboxError;

/// The mode bits no file a command makes may carry: `S_ISUID` and `S_ISGID`.
const SET_ID_BITS: [u64; 2] = [0o4000, 0o2000];

/// The calls that take a mode, with the index of the mode among their arguments.
fn mode_calls() -> Vec<(i64, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    // The older calls the newer ones replace exist on x86_64 only.
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    calls
}

/// `fchmodat2` (Linux 6.6), the same number on every architecture.
const SYS_FCHMODAT2: i64 = 452;

/// The calls refused whole: their mode lies in memory a filter cannot read.
const HIDDEN_MODE_CALLS: [i64; 2] = [libc::SYS_openat2, libc::SYS_io_uring_setup];

/// Takes from the calling thread, and all it starts afterwards, the means to make
/// a file that carries a privilege: set-id mode bits and file capabilities.
pub(crate) fn drop_privileges() -> Result<(), SandboxError> {
    drop_file_capabilities()?;
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(SandboxError::Seccomp)?;
    let mut modes = BTreeMap::new();
    for (call, argument) in mode_calls() {
        let rules = SET_ID_BITS
            .into_iter()
            .map(|bit| {
                let set = SeccompCondition::new(
                    argument,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )?;
                SeccompRule::new(vec![set])
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(SandboxError::Seccomp)?;
        modes.insert(call, rules);
    }
    let refuse_modes = SeccompFilter::new(
        modes,
        SeccompAction::Allow,
        SeccompAction::Errno(Errno::PERM.raw_os_error().unsigned_abs()),
        arch,
    )
    .map_err(SandboxError::Seccomp)?;
    let hidden = HIDDEN_MODE_CALLS
        .into_iter()
        .map(|call| (call, Vec::new()))
        .collect();
    let refuse_hidden = SeccompFilter::new(
        hidden,
        SeccompAction::Allow,
        SeccompAction::Errno(Errno::NOSYS.raw_os_error().unsigned_abs()),
        arch,
    )
    .map_err(SandboxError::Seccomp)?;
    for filter in [refuse_modes, refuse_hidden] {
        let program: seccompiler::BpfProgram = filter.try_into().map_err(SandboxError::Seccomp)?;
        seccompiler::apply_filter(&program).map_err(SandboxError::SeccompApply)?;
    }
    Ok(())
}

/// Takes `CAP_SETFCAP` out of the calling thread's bounding set (so that no
/// program it starts, root's included, has it) and out of its own sets. A thread
/// that may not change its bounding set (an ordinary user's) has no such
/// capability to pass on.
fn drop_file_capabilities() -> Result<(), SandboxError> {
    let failed = |errno: Errno| SandboxError::Capabilities {
        source: errno.into(),
    };
    let mut sets = rustix::thread::capabilities(None).map_err(failed)?;
    match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::SETFCAP) {
        Ok(()) => {}
        Err(Errno::PERM) if !sets.permitted.contains(CapabilitySet::SETFCAP) => {}
        Err(errno) => return Err(failed(errno)),
    }
    if (sets.effective | sets.permitted | sets.inheritable).contains(CapabilitySet::SETFCAP) {
        sets.effective.remove(CapabilitySet::SETFCAP);
        sets.permitted.remove(CapabilitySet::SETFCAP);
        sets.inheritable.remove(CapabilitySet::SETFCAP);
        rustix::thread::set_capabilities(None, sets).map_err(failed)?;
    }
    Ok(())
}
