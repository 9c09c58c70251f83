//! [`ToolsPidNs`]: the PID namespace every process of every sandboxed run
//! of a server is born in, held by the [reader](crate::reader) (its pid 1).
//!
//! A thread joins it for its children with [`ToolsPidNs::enter_for_children`]
//! (`setns(CLONE_NEWPID)` changes only that thread's `pid_ns_for_children`;
//! the server itself stays where it is, and `clone` still returns the
//! child's pid as the server sees it). The namespace's *monitor* thread made
//! the reader and reads its control socket: it hands the events the reader
//! forwards to the [`Watcher`](crate::Watcher) attached, answers flushes,
//! and notices the reader's death (logged as an error: every process of
//! the namespace died with it), after which it makes a new namespace and
//! reader; threads that joined the old one join the new one at their next
//! [`enter_for_children`](ToolsPidNs::enter_for_children), and the events
//! still queued in the fanotify group from before are reported with an
//! unknown origin.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

use crate::proto::*;
use crate::sys;

/// How long the monitor waits for a new reader to say it is ready.
const READY_WAIT: Duration = Duration::from_secs(5);
/// How long a dead reader's namespace may take to empty before the next one
/// is made anyway.
const EMPTY_WAIT: Duration = Duration::from_secs(5);
/// The pause before the first restart; doubled after each death within a
/// minute of the last one, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Numbers the readers of every namespace of this process: the generation a
/// thread joined ([`JOINED`]) names one reader's namespace, whichever
/// `ToolsPidNs` made it.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// This process's own PID namespace (`/proc/self/ns/pid`), opened when the
/// first tools namespace is made: what [`leave_for_children`] returns to.
static OWN_NS: OnceLock<Option<OwnedFd>> = OnceLock::new();

thread_local! {
    /// The reader generation whose namespace this thread's children are born
    /// in (0: this process's own, as far as this thread knows).
    static JOINED: Cell<u64> = const { Cell::new(0) };
    /// The namespace this thread joined last (for [`outside_tools_namespace`]).
    static REGISTRY: std::cell::RefCell<Option<std::sync::Weak<Inner>>> =
        const { std::cell::RefCell::new(None) };
}

/// Events forwarded by the reader: raw `read(2)` bytes of the group, and
/// whether their origin is unknown.
pub(crate) type Sink = Arc<dyn Fn(&[u8], bool) + Send + Sync>;

/// Why the namespace cannot take a child now.
#[derive(Debug, thiserror::Error)]
pub enum PidNsError {
    /// The reader died and no new one runs (yet): why.
    #[error("the tools PID namespace is gone (its init died: {0})")]
    Gone(String),
    /// The namespace was stopped.
    #[error("the tools PID namespace was stopped")]
    Stopped,
    /// A system call failed.
    #[error("tools PID namespace: {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> PidNsError {
    move |source| PidNsError::Io { what, source }
}

/// A server's tools PID namespace. Cloning shares it.
#[derive(Clone)]
pub struct ToolsPidNs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ToolsPidNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsPidNs")
            .field("reader_pid", &self.reader_pid())
            .finish()
    }
}

struct Inner {
    state: Mutex<State>,
    changed: Condvar,
    /// The live reader's generation (0: none).
    live: AtomicU64,
    /// Messages of the reader this process started and finished handling
    /// (`quiet`): counted from before the `recv` to after the sink ran.
    taking: AtomicU64,
    taken: AtomicU64,
    /// Written to wake the monitor (to stop).
    wake: OwnedFd,
    monitor: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// One reader and its namespace.
struct Current {
    id: u64,
    pid: i32,
    pidfd: Arc<OwnedFd>,
    /// `/proc/<pid>/ns/pid`, opened once the reader is up.
    ns: Arc<OwnedFd>,
    ns_inode: u64,
    /// The server's end of the control socket.
    ctl: Arc<OwnedFd>,
    /// The counters the reader shares (`quiet`).
    shared: Arc<sys::SharedPage>,
}

#[derive(Default)]
struct State {
    current: Option<Current>,
    stopping: bool,
    /// Why the last reader is gone, while no new one runs.
    gone: Option<String>,
    /// How many readers died (the first one included in the count once dead).
    deaths: u64,
    /// Flushes: the last number handed out and the last answered.
    next_seq: u64,
    flushed: u64,
    /// The fanotify group handed to every reader, and who gets the events.
    group: Option<Arc<OwnedFd>>,
    sink: Option<Sink>,
    others: bool,
}

impl ToolsPidNs {
    /// Makes the namespace: a monitor thread that forks the reader (pid 1
    /// of a new PID namespace, dying with that thread) and waits until it is
    /// set up. Needs CAP_SYS_ADMIN (root, or a server in its own user
    /// namespace).
    pub fn start() -> Result<ToolsPidNs, PidNsError> {
        OWN_NS.get_or_init(|| sys::open(c"/proc/self/ns/pid", libc::O_RDONLY).ok());
        let (wake_r, wake_w) = sys::pipe().map_err(io_err("pipe"))?;
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            live: AtomicU64::new(0),
            taking: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            wake: wake_w,
            monitor: Mutex::new(None),
        });
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let weak = Arc::downgrade(&inner);
        let thread = std::thread::Builder::new()
            .name("toolsrv-toolsns".into())
            .spawn(move || monitor(weak, wake_r, tx))
            .map_err(io_err("start the monitor thread"))?;
        *inner.monitor.lock_unpoisoned() = Some(thread);
        match rx.recv_timeout(READY_WAIT + Duration::from_secs(1)) {
            Ok(Ok(())) => Ok(ToolsPidNs { inner }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(PidNsError::Io {
                what: "start the reader",
                source: io::Error::from_raw_os_error(libc::ETIMEDOUT),
            }),
        }
    }

    /// This thread's children are born in the namespace from now on: once
    /// per thread and reader (a system call only the first time, or after a
    /// new reader replaced a dead one). Fails while no reader runs.
    pub fn enter_for_children(&self) -> Result<(), PidNsError> {
        let live = self.inner.live.load(Ordering::Acquire);
        if live != 0 && JOINED.get() == live {
            return Ok(());
        }
        let st = self.inner.state.lock_unpoisoned();
        let Some(cur) = &st.current else {
            return Err(if st.stopping {
                PidNsError::Stopped
            } else {
                PidNsError::Gone(st.gone.clone().unwrap_or_default())
            });
        };
        sys::setns_pid(cur.ns.as_fd()).map_err(io_err("setns(CLONE_NEWPID)"))?;
        JOINED.set(cur.id);
        REGISTRY.with(|r| *r.borrow_mut() = Some(Arc::downgrade(&self.inner)));
        Ok(())
    }

    /// After a spawn into the namespace failed with ENOMEM (the kernel's
    /// answer once a namespace's init died): waits up to `limit` for a new
    /// reader and joins its namespace. `Ok(false)`: the namespace this
    /// thread joined is alive, so ENOMEM was something else.
    pub fn revive(&self, limit: Duration) -> Result<bool, PidNsError> {
        let joined = JOINED.get();
        let deadline = Instant::now() + limit;
        let mut st = self.inner.state.lock_unpoisoned();
        loop {
            if st.stopping {
                return Err(PidNsError::Stopped);
            }
            match &st.current {
                Some(cur) if cur.id != joined => {
                    drop(st);
                    self.enter_for_children()?;
                    return Ok(true);
                }
                Some(cur) if !dead(&cur.pidfd) => return Ok(false),
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PidNsError::Gone(st.gone.clone().unwrap_or_default()));
            }
            st = self
                .inner
                .changed
                .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The reader's pid as this process sees it (`None` while none runs).
    pub fn reader_pid(&self) -> Option<i32> {
        self.inner
            .state
            .lock_unpoisoned()
            .current
            .as_ref()
            .map(|c| c.pid)
    }

    /// The inode of the namespace (`/proc/<pid>/ns/pid` of its processes),
    /// which names it (`None` while no reader runs).
    pub fn inode(&self) -> Option<u64> {
        self.inner
            .state
            .lock_unpoisoned()
            .current
            .as_ref()
            .map(|c| c.ns_inode)
    }

    /// Whether a reader runs now.
    pub fn is_alive(&self) -> bool {
        self.inner
            .state
            .lock_unpoisoned()
            .current
            .as_ref()
            .is_some_and(|c| !dead(&c.pidfd))
    }

    /// How many readers died (each took the processes of its namespace with it).
    pub fn deaths(&self) -> u64 {
        self.inner.state.lock_unpoisoned().deaths
    }

    /// Kills the reader (and so every process of the namespace) and waits up
    /// to `limit` for it to be gone; no new one is made. Whether it is gone.
    pub fn stop(&self, limit: Duration) -> bool {
        {
            let mut st = self.inner.state.lock_unpoisoned();
            st.stopping = true;
            if let Some(cur) = &st.current {
                let _ = sys::kill_pidfd(cur.pidfd.as_fd());
            }
        }
        self.inner.changed.notify_all();
        let _ = sys::write(self.inner.wake.as_fd(), b"s");
        let deadline = Instant::now() + limit;
        let mut st = self.inner.state.lock_unpoisoned();
        while st.current.is_some() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .inner
                .changed
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        drop(st);
        if let Some(t) = self.inner.monitor.lock_unpoisoned().take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        true
    }

    /// Hands the fanotify group to the reader (and to every later one) and
    /// sets who receives what it forwards.
    pub(crate) fn attach(&self, group: Arc<OwnedFd>, sink: Sink) -> io::Result<()> {
        let mut st = self.inner.state.lock_unpoisoned();
        st.group = Some(group.clone());
        st.sink = Some(sink);
        if let Some(cur) = &st.current {
            let mut m = [0u8; HEAD];
            m[0] = TO_READER_GROUP;
            sys::send(cur.ctl.as_raw_fd(), &m, Some(group.as_raw_fd()))?;
        }
        Ok(())
    }

    /// Whether the reader forwards events of processes outside the namespace.
    pub(crate) fn set_others(&self, on: bool) -> io::Result<()> {
        let mut st = self.inner.state.lock_unpoisoned();
        st.others = on;
        if let Some(cur) = &st.current {
            let mut m = [0u8; HEAD];
            m[0] = TO_READER_OTHERS;
            m[1] = u8::from(on);
            sys::send(cur.ctl.as_raw_fd(), &m, None)?;
        }
        Ok(())
    }

    /// Returns once every event queued in the group before the call has been
    /// handed to the sink (or `limit` passed, or the reader died: an error).
    /// Whether nothing the group `group` queued is still on its way to the
    /// sink, told without asking the reader: the group has nothing queued,
    /// the reader is not forwarding a batch, the control socket holds no
    /// message and none is being handled here. Checked in that order, the
    /// order events travel, so an event is caught wherever it is. Two
    /// `ioctl`s; `false` when it cannot be told.
    pub(crate) fn quiet(&self, group: std::os::fd::BorrowedFd<'_>) -> bool {
        let st = self.inner.state.lock_unpoisoned();
        let Some(cur) = &st.current else {
            return false;
        };
        if sys::queued(group.as_raw_fd()).map_or(true, |n| n > 0) {
            return false;
        }
        let (started, finished) = cur.shared.counters();
        if started.load(Ordering::SeqCst) != finished.load(Ordering::SeqCst) {
            return false;
        }
        if sys::queued(cur.ctl.as_raw_fd()).map_or(true, |n| n > 0) {
            return false;
        }
        self.inner.taking.load(Ordering::SeqCst) == self.inner.taken.load(Ordering::SeqCst)
    }

    pub(crate) fn flush(&self, limit: Duration) -> io::Result<()> {
        let deadline = Instant::now() + limit;
        let mut st = self.inner.state.lock_unpoisoned();
        let Some(cur) = &st.current else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "no reader runs in the tools PID namespace",
            ));
        };
        let (id, ctl) = (cur.id, cur.ctl.clone());
        st.next_seq += 1;
        let seq = st.next_seq;
        sys::send(ctl.as_raw_fd(), &with_seq(TO_READER_FLUSH, seq), None)?;
        loop {
            if st.flushed >= seq {
                return Ok(());
            }
            if st.current.as_ref().map(|c| c.id) != Some(id) {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the tools PID namespace's reader died during the flush",
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(io::Error::from(io::ErrorKind::TimedOut));
            }
            st = self
                .inner
                .changed
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: the monitor holds only a weak reference,
        // it sees the wake-up and kills the reader.
        self.state.lock_unpoisoned().stopping = true;
        if let Some(cur) = &self.state.lock_unpoisoned().current {
            let _ = sys::kill_pidfd(cur.pidfd.as_fd());
        }
        let _ = sys::write(self.wake.as_fd(), b"s");
    }
}

/// Whether this thread's children are born in a tools namespace (as far as
/// this thread knows: a thread made by such a thread inherits that, see
/// [`leave_for_children`]).
pub fn joined_this_thread() -> bool {
    JOINED.get() != 0
}

/// This thread's children are born in this process's own PID namespace
/// again. A thread inherits where its creator's children are born, so a
/// thread started by one that joined a tools namespace would fork into it:
/// call this first thing in every new thread of a pool whose threads may
/// join (the server does, for its runtime's threads). Nothing is done (no
/// system call) when this process never made a tools namespace.
pub fn leave_for_children() {
    if let Some(Some(own)) = OWN_NS.get() {
        if sys::setns_pid(own.as_fd()).is_ok() {
            JOINED.set(0);
        }
    }
}

/// Runs `f` with this thread's children born in this process's own PID
/// namespace, then back where they were: for a process the server starts
/// that is not a confined tool (`ldd`, `git`) from a thread that joined a
/// tools namespace, which would otherwise be born in it and taken for a
/// tool's. Two `setns` when this thread joined one, nothing otherwise.
pub fn outside_tools_namespace<T>(f: impl FnOnce() -> T) -> T {
    let joined = JOINED.get();
    if joined == 0 {
        return f();
    }
    leave_for_children();
    let out = f();
    // Back into the namespace this thread had joined, while it lives.
    if let Some(ns) = REGISTRY.with(|r| r.borrow().clone()) {
        if let Some(inner) = ns.upgrade() {
            let st = inner.state.lock_unpoisoned();
            if let Some(cur) = st.current.as_ref().filter(|c| c.id == joined) {
                if sys::setns_pid(cur.ns.as_fd()).is_ok() {
                    JOINED.set(joined);
                }
            }
        }
    }
    out
}

/// Whether the process behind `pidfd` has exited.
fn dead(pidfd: &OwnedFd) -> bool {
    let mut p = [libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    matches!(sys::poll(&mut p, 0), Ok(n) if n > 0)
}

/// Forks a reader and waits until it is ready.
fn spawn_reader() -> Result<Current, PidNsError> {
    let (server, reader) = sys::seqpacket_pair().map_err(io_err("socketpair"))?;
    let mut read_buf = vec![0u8; EVENTS_MAX];
    let mut msg_buf = vec![0u8; HEAD + EVENTS_MAX];
    let shared = Arc::new(sys::SharedPage::new().map_err(io_err("mmap"))?);
    let args = crate::reader::ReaderArgs {
        ctl: reader.as_raw_fd(),
        read_buf: read_buf.as_mut_ptr(),
        read_len: read_buf.len(),
        msg_buf: msg_buf.as_mut_ptr(),
        msg_len: msg_buf.len(),
        shared: shared.as_ptr(),
    };
    // Safety: the child runs `reader::main` alone, which makes only
    // reader-safe calls on the buffers above (its own copies).
    let (pid, pidfd) = match unsafe { sys::clone_pid_namespace() } {
        Ok(sys::Cloned::Child) => {
            // Safety: in the child of `clone_pid_namespace`, with the buffers above.
            unsafe { crate::reader::main(&args) }
        }
        Ok(sys::Cloned::Parent(pid, pidfd)) => (pid, pidfd),
        Err(e) => return Err(io_err("clone(CLONE_NEWPID)")(e)),
    };
    drop(reader);
    drop((read_buf, msg_buf));
    let fail = |what, e| {
        let _ = sys::kill_pidfd(pidfd.as_fd());
        wait_exit(&pidfd, EMPTY_WAIT);
        io_err(what)(e)
    };
    // The reader's namespace, opened while it is our unreaped child (its pid
    // cannot name another process).
    let ns_path = std::ffi::CString::new(format!("/proc/{pid}/ns/pid"))
        .map_err(|e| fail("namespace path", io::Error::other(e)))?;
    let ns = sys::open(&ns_path, libc::O_RDONLY).map_err(|e| fail("open its namespace", e))?;
    let ns_inode = sys::inode(ns.as_fd()).map_err(|e| fail("stat its namespace", e))?;
    let mut p = [libc::pollfd {
        fd: server.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    sys::poll(&mut p, READY_WAIT.as_millis() as i32)
        .and_then(|n| {
            let mut b = [0u8; 64];
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
            }
            match sys::recv(server.as_raw_fd(), &mut b)? {
                (len, _) if len >= HEAD && b[0] == FROM_READER_READY => Ok(()),
                _ => Err(io::Error::from_raw_os_error(libc::EPROTO)),
            }
        })
        .map_err(|e| fail("wait for the reader", e))?;
    Ok(Current {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        pid,
        pidfd: Arc::new(pidfd),
        ns: Arc::new(ns),
        ns_inode,
        ctl: Arc::new(server),
        shared,
    })
}

/// Waits up to `limit` for the process behind `pidfd` to exit (for a
/// namespace's init: for every process of the namespace to be gone), then
/// reaps it. Whether it is gone.
fn wait_exit(pidfd: &OwnedFd, limit: Duration) -> bool {
    let mut p = [libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let exited = matches!(sys::poll(&mut p, limit.as_millis() as i32), Ok(n) if n > 0);
    if exited {
        sys::reap_pidfd(pidfd.as_fd());
    }
    exited
}

/// The monitor thread: makes the first reader (reporting the outcome on
/// `started`), then reads its control socket until the namespace is
/// stopped, making a new reader whenever one dies.
fn monitor(
    inner: std::sync::Weak<Inner>,
    wake: OwnedFd,
    started: std::sync::mpsc::SyncSender<Result<(), PidNsError>>,
) {
    let first = spawn_reader();
    let cur = match first {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    // The reader this thread made last: killed and reaped here whatever
    // happens to the handles.
    let mut reader = Some(cur.pidfd.clone());
    let finish = |reader: Option<Arc<OwnedFd>>| {
        if let Some(pidfd) = reader {
            let _ = sys::kill_pidfd(pidfd.as_fd());
            wait_exit(&pidfd, EMPTY_WAIT);
        }
    };
    let Some(me) = inner.upgrade() else {
        return finish(reader);
    };
    install(&me, cur, false);
    let _ = started.send(Ok(()));
    drop(me);
    let mut backoff = FIRST_BACKOFF;
    let mut last_death: Option<Instant> = None;
    loop {
        let Some(me) = inner.upgrade() else {
            return finish(reader);
        };
        let ctl = me
            .state
            .lock_unpoisoned()
            .current
            .as_ref()
            .map(|c| c.ctl.clone());
        drop(me);
        let ended = match ctl {
            Some(ctl) => serve(&inner, &ctl, &wake),
            // The last restart failed: try again after the pause.
            None => Ended::NoReader,
        };
        // The reader is gone, or we are stopping: either way it is killed
        // and reaped before anything else.
        let old_pid = inner
            .upgrade()
            .and_then(|me| me.state.lock_unpoisoned().current.as_ref().map(|c| c.pid));
        finish(reader.take());
        let Some(me) = inner.upgrade() else { return };
        let stopping = {
            let mut st = me.state.lock_unpoisoned();
            st.current = None;
            st.stopping || matches!(ended, Ended::Stop)
        };
        me.live.store(0, Ordering::Release);
        if stopping {
            me.changed.notify_all();
            return;
        }
        if matches!(ended, Ended::NoReader) {
            backoff = (backoff * 2).min(MAX_BACKOFF);
        } else {
            let mut st = me.state.lock_unpoisoned();
            st.deaths += 1;
            st.gone = Some(format!("pid {} ended", old_pid.unwrap_or(0)));
            drop(st);
            tracing::error!(
                reader = old_pid.unwrap_or(0),
                "the tools PID namespace's init died, and every process of the sandboxed runs with it; making a new namespace"
            );
            if last_death.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
                backoff = (backoff * 2).min(MAX_BACKOFF);
            } else {
                backoff = FIRST_BACKOFF;
            }
            last_death = Some(Instant::now());
        }
        me.changed.notify_all();
        drop(me);
        if pause(&inner, &wake, backoff) {
            if let Some(me) = inner.upgrade() {
                me.changed.notify_all();
            }
            return;
        }
        let Some(me) = inner.upgrade() else { return };
        match spawn_reader() {
            Ok(cur) => {
                tracing::info!(
                    reader = cur.pid,
                    "a new tools PID namespace replaces the dead one"
                );
                reader = Some(cur.pidfd.clone());
                install(&me, cur, true);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot make a new tools PID namespace; confined runs are refused until one can be made");
                me.state.lock_unpoisoned().gone = Some(e.to_string());
            }
        }
        me.changed.notify_all();
    }
}

/// Makes `cur` the live reader; hands it the group (its queued events of
/// unknown origin when `after_death`) and the "others" setting.
fn install(me: &Inner, cur: Current, after_death: bool) {
    let mut st = me.state.lock_unpoisoned();
    if let Some(group) = &st.group {
        let mut m = [0u8; HEAD];
        m[0] = TO_READER_GROUP;
        if after_death {
            m[1] = FLAG_UNKNOWN;
        }
        let _ = sys::send(cur.ctl.as_raw_fd(), &m, Some(group.as_raw_fd()));
    }
    if st.others {
        let mut m = [0u8; HEAD];
        m[0] = TO_READER_OTHERS;
        m[1] = 1;
        let _ = sys::send(cur.ctl.as_raw_fd(), &m, None);
    }
    me.live.store(cur.id, Ordering::Release);
    st.gone = None;
    st.current = Some(cur);
}

/// Waits `d` unless woken to stop; whether to stop.
fn pause(inner: &std::sync::Weak<Inner>, wake: &OwnedFd, d: Duration) -> bool {
    let mut p = [libc::pollfd {
        fd: wake.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let _ = sys::poll(&mut p, d.as_millis() as i32);
    inner
        .upgrade()
        .is_none_or(|me| me.state.lock_unpoisoned().stopping)
}

/// How [`serve`] ended.
enum Ended {
    /// The reader closed its socket (it died).
    Dead,
    /// Woken to stop.
    Stop,
    /// No reader ran (the last restart failed).
    NoReader,
}

/// Counts a message as handled when dropped.
struct Taken<'a>(&'a AtomicU64);

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads the reader's messages until it dies or the namespace stops.
fn serve(inner: &std::sync::Weak<Inner>, ctl: &OwnedFd, wake: &OwnedFd) -> Ended {
    let mut buf = vec![0u8; HEAD + EVENTS_MAX];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: ctl.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        if sys::poll(&mut fds, -1).is_err() {
            return Ended::Dead;
        }
        if fds[1].revents != 0 {
            let mut b = [0u8; 64];
            let _ = sys::read(wake.as_raw_fd(), &mut b);
            if inner
                .upgrade()
                .is_none_or(|me| me.state.lock_unpoisoned().stopping)
            {
                return Ended::Stop;
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        let Some(me) = inner.upgrade() else {
            return Ended::Stop;
        };
        // Counted from before the receive (the message is still queued on
        // the socket until then) to after it was handed on: `quiet`.
        me.taking.fetch_add(1, Ordering::SeqCst);
        let _taken = Taken(&me.taken);
        let (n, fd) = match sys::recv(ctl.as_raw_fd(), &mut buf) {
            Ok((0, _)) | Err(_) => return Ended::Dead,
            Ok(got) => got,
        };
        if let Some(fd) = fd {
            sys::close(fd);
        }
        let m = &buf[..n];
        if m.len() < HEAD {
            continue;
        }
        match m[0] {
            FROM_READER_EVENTS => {
                let sink = me.state.lock_unpoisoned().sink.clone();
                if let Some(sink) = sink {
                    sink(&m[HEAD..], m[1] & FLAG_UNKNOWN != 0);
                }
            }
            FROM_READER_FLUSHED => {
                if let Some(seq) = seq_of(m) {
                    let mut st = me.state.lock_unpoisoned();
                    st.flushed = st.flushed.max(seq);
                    drop(st);
                    me.changed.notify_all();
                }
            }
            _ => {}
        }
    }
}
