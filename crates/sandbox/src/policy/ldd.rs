//! Shared-library dependencies of an executable, from `ldd`, cached per
//! (canonical path, mtime).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{LazyLock, Mutex};
use std::time::SystemTime;

use toolsrv_base::LockUnpoisoned;

/// Entries kept before the cache is emptied (bounds memory).
const CACHE_LIMIT: usize = 512;

type Cache = HashMap<PathBuf, (SystemTime, Vec<PathBuf>)>;

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Where `ldd` is looked for (never through `PATH`).
const LDD: &[&str] = &["/usr/bin/ldd", "/bin/ldd"];

/// The canonical paths of the shared libraries (and the dynamic loader) `exe`
/// needs; empty for scripts, static binaries and on any failure (logged).
pub(crate) fn shared_libraries(exe: &Path) -> Vec<PathBuf> {
    let mtime = match std::fs::metadata(exe).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!(path = %exe.display(), error = %e, "ldd skipped");
            return Vec::new();
        }
    };
    {
        let cache = CACHE.lock_unpoisoned();
        if let Some((t, libs)) = cache.get(exe) {
            if *t == mtime {
                return libs.clone();
            }
        }
    }
    let libs = run_ldd(exe);
    let mut cache = CACHE.lock_unpoisoned();
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(exe.to_path_buf(), (mtime, libs.clone()));
    libs
}

fn run_ldd(exe: &Path) -> Vec<PathBuf> {
    let Some(ldd) = LDD.iter().map(Path::new).find(|p| p.exists()) else {
        tracing::debug!("ldd not found; shared libraries not added");
        return Vec::new();
    };
    // Not a tool: never born in the server's tools PID namespace, where its
    // changes would be taken for a tool's (docs/watch.md).
    let output = match toolsrv_watch::outside_tools_namespace(|| {
        Command::new(ldd)
            .arg("--")
            .arg(exe)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    }) {
        Ok(o) => o,
        Err(e) => {
            tracing::debug!(path = %exe.display(), error = %e, "ldd failed to run");
            return Vec::new();
        }
    };
    if !output.status.success() {
        tracing::debug!(path = %exe.display(), "ldd: not a dynamic executable");
        return Vec::new();
    }
    let mut libs = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if let Some(p) = parse_ldd_line(line).and_then(|p| std::fs::canonicalize(p).ok()) {
            if !libs.contains(&p) {
                libs.push(p);
            }
        }
    }
    libs
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or
/// `/lib64/ld-linux-x86-64.so.2 (0x...)`; `linux-vdso.so.1 (0x...)` and
/// `not found` lines have no path.
pub(crate) fn parse_ldd_line(line: &str) -> Option<&str> {
    let line = line.trim();
    let target = match line.split_once("=>") {
        Some((_, right)) => right.trim(),
        None => line,
    };
    let path = target.split(" (0x").next()?.trim();
    path.starts_with('/').then_some(path)
}
