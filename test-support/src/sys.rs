//! The libc calls tests need and the standard library has no safe form for: signals to
//! a process or a process group, a running process's open-file limit, the clock tick
//! rate. The only `unsafe` of the test code lives here, each block with its reason.
#![allow(unsafe_code)]

use std::io;

/// Sends signal `sig` (`libc::SIGKILL`, `libc::SIGTERM`, …) to process `pid`.
pub fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = checked(pid)?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `sig` to the process group led by `pgid` (a child started with
/// `process_group(0)`), so whatever it spawned goes with it.
pub fn signal_group(pgid: u32, sig: libc::c_int) -> io::Result<()> {
    let pgid = checked(pgid)?;
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a group.
    let rc = unsafe { libc::kill(-pgid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the open-file limit (soft and hard) of running process `pid`.
pub fn limit_open_files(pid: u32, limit: u64) -> io::Result<()> {
    let pid = checked(pid)?;
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: prlimit reads `rlimit` and writes nothing (the old-limit pointer is null).
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &rlimit, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc/<pid>/stat` times.
pub fn clock_ticks_per_second() -> i64 {
    // SAFETY: sysconf only reads a configuration value.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}

/// A pid kill(2) may be given: never 0 or 1 (every process of the group, or init).
fn checked(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(pid) if pid > 1 => Ok(pid),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        )),
    }
}
