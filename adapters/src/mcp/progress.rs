//! Whether a stdio server that has not answered `initialize` yet is still starting: its
//! process tree (the child and every descendant — `npx` runs `npm`, which runs `node`)
//! used CPU or read or wrote anything since the last look.
//!
//! On Linux this reads `/proc`: each process's CPU time (`utime + stime` of
//! `/proc/PID/stat`, plus `cutime + cstime`, the CPU of children it has reaped) and its
//! I/O (`rchar + wchar` of `/proc/PID/io`, which includes what reaped children did).
//! The tree is every process whose parent chain reaches the child, or that is in the
//! child's process group (the child leads a group of its own, see `stdio.rs`), so a
//! helper that was re-parented still counts. A new process in the tree is progress too.
//! Elsewhere nothing is known and no progress is ever seen: the caller then keeps the
//! plain deadline.

use std::collections::HashMap;

/// One process's counters: CPU clock ticks, and I/O bytes (0 when unreadable).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Counters {
    cpu: u64,
    io: u64,
}

/// The process tree under one root, and its counters at the last look.
pub(crate) struct ProcessTree {
    root: u32,
    last: HashMap<u32, Counters>,
}

impl ProcessTree {
    /// Watches the tree under `root`; the first [`progressed`](Self::progressed) compares
    /// with this moment.
    pub(crate) fn new(root: u32) -> Self {
        let mut tree = Self {
            root,
            last: HashMap::new(),
        };
        tree.last = tree.read();
        tree
    }

    /// Whether the tree made progress since the last call (or since [`new`](Self::new)):
    /// a process of it used CPU or did I/O, or a process joined it.
    pub(crate) fn progressed(&mut self) -> bool {
        let now = self.read();
        let moved = now
            .iter()
            .any(|(pid, c)| self.last.get(pid).is_none_or(|before| before != c));
        self.last = now;
        moved
    }

    /// The tree's processes and their counters now (empty where `/proc` is not there).
    fn read(&self) -> HashMap<u32, Counters> {
        #[cfg(target_os = "linux")]
        {
            linux::tree(self.root)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = self.root;
            HashMap::new()
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Counters;
    use std::collections::HashMap;

    /// What `/proc/PID/stat` says of one process.
    struct Stat {
        ppid: u32,
        pgrp: u32,
        cpu: u64,
    }

    /// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses and may
    /// hold spaces and parentheses itself: the fields are read after its last `)`.
    fn stat(pid: u32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = text.rsplit_once(')')?;
        // After the name: state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8)
        // flags(9) minflt(10) cminflt(11) majflt(12) cmajflt(13) utime(14) stime(15)
        // cutime(16) cstime(17).
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let num = |field: usize| -> Option<u64> { fields.get(field - 3)?.parse().ok() };
        Some(Stat {
            ppid: u32::try_from(num(4)?).ok()?,
            pgrp: u32::try_from(num(5)?).ok()?,
            cpu: [14, 15, 16, 17].iter().filter_map(|&f| num(f)).sum(),
        })
    }

    /// `rchar + wchar` of `/proc/PID/io` (0 when it cannot be read).
    fn io(pid: u32) -> u64 {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/io")) else {
            return 0;
        };
        text.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                matches!(key, "rchar" | "wchar")
                    .then(|| value.trim().parse::<u64>().ok())
                    .flatten()
            })
            .sum()
    }

    /// Every process under `root` (itself included) with its counters.
    pub(super) fn tree(root: u32) -> HashMap<u32, Counters> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return HashMap::new();
        };
        let all: HashMap<u32, Stat> = dir
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, stat(pid)?)))
            .collect();
        let mut members: Vec<u32> = all
            .iter()
            .filter(|(pid, s)| **pid == root || s.pgrp == root)
            .map(|(pid, _)| *pid)
            .collect();
        // Descendants by parent, breadth first (bounded by the process count).
        let mut i = 0;
        while i < members.len() {
            let parent = members[i];
            for (pid, s) in &all {
                if s.ppid == parent && !members.contains(pid) {
                    members.push(*pid);
                }
            }
            i += 1;
        }
        members
            .into_iter()
            .map(|pid| {
                (
                    pid,
                    Counters {
                        cpu: all[&pid].cpu,
                        io: io(pid),
                    },
                )
            })
            .collect()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    fn spawn(script: &str) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("sh")
    }

    #[test]
    fn a_busy_grandchild_is_progress_and_a_sleeping_tree_is_not() {
        // The shell waits (idle) for a child that burns CPU: the progress is the
        // grandchild's alone, seen through the tree.
        let mut busy = spawn("sh -c 'while :; do :; done' & wait");
        let mut idle = spawn("sleep 30 & wait");
        // Past the start (exec, the dynamic loader's reads).
        std::thread::sleep(Duration::from_millis(300));
        let mut busy_tree = ProcessTree::new(busy.id());
        let mut idle_tree = ProcessTree::new(idle.id());
        assert!(busy_tree.last.len() >= 2, "the shell and its child");
        assert!(idle_tree.last.len() >= 2, "the shell and sleep");
        std::thread::sleep(Duration::from_millis(300));
        let busy_moved = busy_tree.progressed();
        let idle_moved = idle_tree.progressed();
        for child in [&mut busy, &mut idle] {
            // The whole group: the shell and what it started (kill(2) on the group the
            // child leads, never a `kill` command whose argument parsing could name
            // another group).
            let _ = toolgate_test_support::sys::signal_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
        assert!(busy_moved, "a CPU-bound grandchild is progress");
        assert!(!idle_moved, "a sleeping tree is not");
    }
}
