//! `watch`: how fast the server learns that a tool created something, and
//! how fast it can move it into quarantine (crate `toolsrv-watch`,
//! docs/watch.md). Needs root (a privileged fanotify group).
//!
//! A helper process born in a tools PID namespace (as a sandboxed tool is)
//! creates files one at a time in a directory of the bench, stamping
//! `CLOCK_MONOTONIC` just before each `open(O_CREAT)`. Each creation is seen
//! twice, from the same run:
//!
//! - by a [`Watcher`] with a filesystem mark on that directory's filesystem,
//!   read by the namespace's init and handed to the bench's subscriber
//!   (origin: a tool): **create → event received**, p50 and p99;
//! - by an inotify watch on that directory read by a thread of the bench,
//!   the baseline: the kernel's own notification, one hop, no attribution.
//!
//! Then the bench quarantines the file the event names (the same
//! filesystem: a rename): **create → quarantined**, and the move alone
//! beside a bare `renameat2` of a file in the bench process. Goal: create →
//! quarantined p99 under 50 ms (issue 34: "within 50 ms of its creation").

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use toolsrv_watch::{EventKind, Kinds, Origin, Quarantine, ToolsPidNs, Watcher};

use crate::benches::Ctx;
use crate::report::{baseline_line, human, time_line, Figure};
use crate::stats::{percentile_of, Summary};

/// Measured creations unless `--iters` says otherwise.
pub const DEFAULT_ITERS: usize = 1_000;
/// Unmeasured creations first.
const WARMUP: usize = 50;
/// The bound on create → quarantined (p99).
pub const GOAL_P99: Duration = Duration::from_millis(50);
/// How long one event may take before the bench gives up.
const EVENT_LIMIT: Duration = Duration::from_secs(5);

/// Run `watch`.
pub fn run(ctx: &Ctx) -> Result<()> {
    let iters = ctx.iters.unwrap_or(DEFAULT_ITERS);
    let base = std::env::temp_dir();
    let ws = tempfile::Builder::new()
        .prefix("toolsrv-bench-watch-")
        .tempdir_in(&base)
        .context("workspace directory")?;
    let state = tempfile::Builder::new()
        .prefix("toolsrv-bench-watch-state-")
        .tempdir_in(&base)
        .context("state directory")?;
    let dir = std::fs::canonicalize(ws.path())?;
    let ns = ToolsPidNs::start().context("cannot make a tools PID namespace (root needed)")?;
    let watcher = Watcher::new(Some(&ns)).context("cannot make the fanotify group")?;
    watcher
        .watch_filesystem(&dir, Kinds::DEFAULT)
        .context("cannot mark the filesystem (root needed)")?;
    let events = watcher.subscribe();
    let quarantine = Quarantine::new(state.path()).context("quarantine")?;
    let inotify = Inotify::start(&dir)?;
    let total = WARMUP + iters;
    let helper = Helper::start(&ns, &dir, total)?;
    println!(
        "\n== watch: a process in a tools PID namespace creates a file in {} ({}), {iters} creations after {WARMUP} warm-up; each seen by the watcher (filesystem mark, read by the namespace's init) and by inotify on the directory (bench thread), then quarantined",
        dir.display(),
        fs_type(&dir)
    );
    let (mut to_event, mut to_inotify, mut to_moved, mut moves) = (
        Vec::with_capacity(iters),
        Vec::with_capacity(iters),
        Vec::with_capacity(iters),
        Vec::with_capacity(iters),
    );
    for i in 0..total {
        let name = Helper::name(i);
        let created = helper.create()?;
        let seen = loop {
            let Some(e) = events.recv_timeout(EVENT_LIMIT) else {
                bail!("no event for {name} within {EVENT_LIMIT:?}");
            };
            if e.kind == EventKind::Created && e.name == std::ffi::OsStr::new(&name) {
                ensure!(
                    matches!(e.origin, Origin::Tool { .. }),
                    "{name} attributed to {:?}",
                    e.origin
                );
                break (now(), e.path());
            }
        };
        let moved_at = {
            quarantine
                .move_in(&seen.1)
                .with_context(|| format!("quarantining {}", seen.1.display()))?;
            now()
        };
        let inotify_at = inotify.wait_for(&name, EVENT_LIMIT)?;
        if i >= WARMUP {
            to_event.push(seen.0.saturating_sub(created));
            to_inotify.push(inotify_at.saturating_sub(created));
            to_moved.push(moved_at.saturating_sub(created));
            moves.push(moved_at.saturating_sub(seen.0));
        }
    }
    drop(helper);
    let renames = bare_renames(&dir, state.path(), iters)?;
    let fig = |name: &str, v: &[Duration]| -> Result<Figure> {
        Ok(Figure {
            name: name.to_string(),
            summary: Summary::of(v).context("no samples")?,
        })
    };
    let inotify_fig = fig("create -> inotify event (bench)", &to_inotify)?;
    let event_fig = fig("create -> event (tools namespace)", &to_event)?;
    let moved_fig = fig("create -> quarantined", &to_moved)?;
    let rename_fig = fig("renameat2 of a file (bench)", &renames)?;
    let move_fig = fig("Quarantine::move_in of a file", &moves)?;
    let p99 = |v: &[Duration]| percentile_of(v, 99).map_or("-".to_string(), human);
    println!("{}", baseline_line(&inotify_fig));
    println!(
        "{}   [p99 {} vs {}]",
        time_line(&event_fig, &inotify_fig, None),
        p99(&to_event),
        p99(&to_inotify)
    );
    let p99_moved = percentile_of(&to_moved, 99).unwrap_or_default();
    println!(
        "{}   [p99 {} (goal p99 < {}: {})]",
        time_line(&moved_fig, &inotify_fig, None),
        human(p99_moved),
        human(GOAL_P99),
        if p99_moved < GOAL_P99 {
            "met"
        } else {
            "MISSED"
        }
    );
    println!("{}", baseline_line(&rename_fig));
    println!(
        "{}   [p99 {}]",
        time_line(&move_fig, &rename_fig, None),
        p99(&moves)
    );
    println!(
        "   events the watcher could not name (directory gone): {}",
        watcher.unresolved()
    );
    Ok(())
}

/// `CLOCK_MONOTONIC` now, as a duration since its origin (comparable across
/// processes).
fn now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The filesystem type of `p` (for the report).
fn fs_type(p: &Path) -> String {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(p)
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown filesystem".to_string(),
    }
}

/// `renameat2(RENAME_NOREPLACE)` of a fresh file from `from` to `to`, timed
/// in the bench process, `n` times.
fn bare_renames(from: &Path, to: &Path, n: usize) -> Result<Vec<Duration>> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let a = from.join(format!("r{i}"));
        let b = to.join(format!("r{i}"));
        std::fs::write(&a, b"")?;
        let (ca, cb) = (
            CString::new(a.as_os_str().as_bytes())?,
            CString::new(b.as_os_str().as_bytes())?,
        );
        let t = now();
        // Safety: two NUL-terminated paths that outlive the call.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        v.push(now().saturating_sub(t));
        ensure!(r == 0, "rename: {}", std::io::Error::last_os_error());
    }
    Ok(v)
}

/// The creating process: forked by a thread that joined the tools
/// namespace; on each byte read from `go` it stamps the clock, creates the
/// next file and writes the stamp back.
struct Helper {
    pid: i32,
    go: OwnedFd,
    stamps: OwnedFd,
}

impl Helper {
    fn name(i: usize) -> String {
        format!("created-{i}")
    }

    fn start(ns: &ToolsPidNs, dir: &Path, count: usize) -> Result<Helper> {
        let names: Vec<CString> = (0..count)
            .map(|i| CString::new(Helper::name(i)))
            .collect::<Result<_, _>>()?;
        let cdir = CString::new(dir.as_os_str().as_bytes())?;
        let (go_r, go_w) = pipe()?;
        let (st_r, st_w) = pipe()?;
        let ns = ns.clone();
        // A thread of its own joins the namespace (the bench's threads do not).
        let pid = std::thread::spawn(move || -> Result<i32> {
            ns.enter_for_children()?;
            // Safety: the child makes only plain system calls on memory
            // prepared before the fork (the names, the pipes), then _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // Safety: as above.
                unsafe { helper_main(&cdir, &names, go_r.as_raw_fd(), st_w.as_raw_fd()) }
            }
            ensure!(pid > 0, "fork: {}", std::io::Error::last_os_error());
            Ok(pid)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the helper's thread panicked"))??;
        Ok(Helper {
            pid,
            go: go_w,
            stamps: st_r,
        })
    }

    /// Has the next file created; when (the helper's stamp).
    fn create(&self) -> Result<Duration> {
        // Safety: plain write and read on pipes we own.
        let w = unsafe { libc::write(self.go.as_raw_fd(), b"c".as_ptr().cast(), 1) };
        ensure!(w == 1, "the helper is gone");
        let mut b = [0u8; 16];
        // Safety: as above; the buffer is ours.
        let r = unsafe { libc::read(self.stamps.as_raw_fd(), b.as_mut_ptr().cast(), 16) };
        ensure!(r == 16, "the helper did not create a file");
        let secs = u64::from_ne_bytes(b[..8].try_into()?);
        let nanos = u64::from_ne_bytes(b[8..].try_into()?);
        Ok(Duration::new(secs, nanos as u32))
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Safety: kill and reap of the child this bench forked.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The helper's loop.
///
/// # Safety
///
/// Runs in the child of a fork of a multi-threaded process: only plain
/// system calls, on memory prepared before the fork.
unsafe fn helper_main(dir: &CString, names: &[CString], go: i32, stamps: i32) -> ! {
    // Safety: plain system calls on descriptors and strings we own.
    unsafe {
        let d = libc::open(dir.as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
        for name in names {
            let mut b = [0u8; 1];
            if libc::read(go, b.as_mut_ptr().cast(), 1) != 1 {
                break;
            }
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
            let fd = libc::openat(d, name.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
            libc::close(fd);
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&(ts.tv_sec as u64).to_ne_bytes());
            out[8..].copy_from_slice(&(ts.tv_nsec as u64).to_ne_bytes());
            libc::write(stamps, out.as_ptr().cast(), 16);
        }
        libc::_exit(0)
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // Safety: pipe2 writes two descriptors into the array we own.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    ensure!(
        r == 0,
        "pipe: {}",
        std::io::Error::last_os_error()
    );
    // Safety: both are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// An inotify watch on one directory, read by a thread that stamps each
/// `IN_CREATE` by name.
struct Inotify {
    seen: Arc<(
        Mutex<std::collections::HashMap<String, Duration>>,
        std::sync::Condvar,
    )>,
    _fd: Arc<OwnedFd>,
}

impl Inotify {
    fn start(dir: &Path) -> Result<Inotify> {
        // Safety: inotify_init1 with flags only.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        ensure!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // Safety: a new descriptor, ours.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let c = CString::new(dir.as_os_str().as_bytes())?;
        // Safety: a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), libc::IN_CREATE) };
        ensure!(
            wd >= 0,
            "inotify_add_watch: {}",
            std::io::Error::last_os_error()
        );
        let seen: Arc<(
            Mutex<std::collections::HashMap<String, Duration>>,
            std::sync::Condvar,
        )> = Arc::default();
        let (s2, f2) = (seen.clone(), fd.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                // Safety: the buffer is ours and as long as passed.
                let n = unsafe { libc::read(f2.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                let t = now();
                if n <= 0 {
                    return;
                }
                let mut at = 0usize;
                let mut g = s2.0.lock().unwrap_or_else(|p| p.into_inner());
                while at + 16 <= n as usize {
                    let len =
                        u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap_or_default())
                            as usize;
                    let name = &buf[at + 16..(at + 16 + len).min(n as usize)];
                    let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                    g.insert(String::from_utf8_lossy(name).into_owned(), t);
                    at += 16 + len;
                }
                drop(g);
                s2.1.notify_all();
            }
        });
        Ok(Inotify { seen, _fd: fd })
    }

    /// When inotify reported `name` (waiting up to `limit`).
    fn wait_for(&self, name: &str, limit: Duration) -> Result<Duration> {
        let (m, cv) = &*self.seen;
        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
        let (g2, _) = cv
            .wait_timeout_while(g, limit, |g| !g.contains_key(name))
            .unwrap_or_else(|p| p.into_inner());
        g = g2;
        g.remove(name)
            .with_context(|| format!("inotify never reported {name}"))
    }
}
