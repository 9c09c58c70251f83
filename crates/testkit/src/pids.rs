//! Pids across the server's tools PID namespace (docs/watch.md): a tool
//! knows itself by its pid in that namespace (`$$`, `$!`), this process by
//! another.

use std::os::unix::fs::MetadataExt;

/// The children of `pid` (all its threads'), from procfs.
fn children(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The inode of `pid`'s PID namespace.
fn pid_ns(pid: i32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// The `NSpid:` line of `pid`: its pid in each namespace, outermost first.
fn ns_pids(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("NSpid:")).map(|v| {
                v.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// The parent pid of `pid`.
fn ppid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The tools PID namespace of the server with pid `server`: its inode and
/// its init's pid (a child of the server named `toolsrv-toolsns`), if it
/// has one.
pub fn tools_namespace(server: u32) -> Option<(u64, i32)> {
    children(server).into_iter().find_map(|c| {
        let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).ok()?;
        (comm.trim_end() == "toolsrv-toolsns").then_some(())?;
        Some((pid_ns(c)?, c))
    })
}

/// Every live process of `server`'s tools PID namespace but its init (this
/// process's pids).
pub fn in_tools_namespace(server: u32) -> Vec<i32> {
    let Some((ns, init)) = tools_namespace(server) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| p != init && pid_ns(p) == Some(ns))
        .collect()
}

/// The pid, as this process sees it, of the live process a tool of
/// `server` knows as `tool_pid`: in the server's tools PID namespace (a
/// confined tool), else a descendant of the server with that pid (an
/// unconfined one). 0 when there is none (never a pid of another process:
/// a test then sees it dead).
pub fn host_pid(server: u32, tool_pid: i32) -> i32 {
    if let Some((ns, _)) = tools_namespace(server) {
        if let Ok(rd) = std::fs::read_dir("/proc") {
            let found = rd
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .find(|&p| pid_ns(p) == Some(ns) && ns_pids(p).get(1) == Some(&tool_pid));
            if let Some(p) = found {
                return p;
            }
        }
    }
    // A descendant of the server in our own namespace.
    let mut p = tool_pid;
    for _ in 0..64 {
        match ppid(p) {
            Some(q) if q == server as i32 => return tool_pid,
            Some(q) if q > 1 => p = q,
            _ => break,
        }
    }
    0
}
