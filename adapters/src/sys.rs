//! The two process-level calls the standard library has no safe form for: signalling a
//! child's whole process group, and handing freed heap back to the system. The only
//! `unsafe` in the crate lives here, each block with the reason it is sound.
#![allow(unsafe_code)]

/// The signals the stdio transport sends a child's group.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    Term,
    Kill,
}

/// Sends `sig` to the process group led by `pid` (a stdio child started with
/// `process_group(0)`), so helpers it spawned go with it. Does nothing for no pid,
/// or for 0 and 1 (which would mean "every process" or init).
#[cfg(unix)]
pub(crate) fn signal_group(pid: Option<u32>, sig: Signal) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    let sig = match sig {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) has no memory-safety preconditions; the child leads its own
    // group (process_group(0)), so -pid addresses exactly that group.
    unsafe {
        libc::kill(-pid, sig);
    }
}

#[cfg(not(unix))]
pub(crate) fn signal_group(_pid: Option<u32>, _sig: Signal) {}

/// Hands memory freed by an import (or by a removed upstream) back to the system.
/// glibc keeps freed memory in its arenas, those of the blocking threads an import
/// runs on included: a large spec would otherwise leave its peak behind for good.
/// The gateway's binary allocates with mimalloc, whose heap of a thread may keep free
/// pages until that thread allocates again (an import's blocking thread may just
/// idle): it is collected too. Both calls are cheap when there is nothing to
/// give back, and either is a no-op for the allocator the process does not use.
pub fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    // SAFETY: mi_collect has no preconditions; it only frees and returns memory
    // mimalloc holds unused.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}
