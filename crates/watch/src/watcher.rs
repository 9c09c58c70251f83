//! [`Watcher`]: a fanotify group in FID mode, its marks, and the decoded
//! events ([`Event`]) with their [`Origin`].
//!
//! Where the group is privileged (root) and a [`ToolsPidNs`] is given, the
//! namespace's reader reads the group: an event is a tool's exactly when
//! its pid is visible in the namespace (see `reader.rs`). Otherwise (a
//! non-root server, whose group is unprivileged and reports pid 0 for every
//! process but the reader itself; or no namespace) this crate reads the
//! group on a thread of its own and the origin is [`Origin::Unknown`]
//! (the server's own changes excepted: [`Origin::Other`]).

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

use crate::fid::{self, Fid, RawEvent};
use crate::pidns::ToolsPidNs;
use crate::sys::{self, fan};

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A process of a sandboxed run: its pid as the tools PID namespace
    /// sees it (not the server's view; the process may be gone).
    Tool {
        /// The pid in the tools namespace.
        pid: i32,
    },
    /// Anyone else: the human, an editor, the client, the server itself,
    /// an unconfined (bypass or `--yolo`) run.
    Other,
    /// Cannot be told here (an unprivileged group, no tools namespace, or
    /// an event queued while the reader was being replaced).
    Unknown,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// An entry was made: `creat`/`open(O_CREAT)`, `mkdir`, `mknod`,
    /// `symlink`, `link`.
    Created,
    /// An entry was renamed into `dir` (a rename into place).
    MovedTo,
    /// An entry was renamed out of `dir`.
    MovedFrom,
    /// An entry was removed.
    Deleted,
    /// A file opened for writing was closed.
    ClosedWrite,
    /// The group lost events (its queue overflowed, or the server's queue of
    /// undelivered events did): `dir` and `name` are empty; rescan.
    Overflow,
}

/// One change in a watched place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Whether the entry is a directory.
    pub is_dir: bool,
    /// The directory the entry is in, as this process's mount namespace
    /// names it now (where the directory is when the event is read).
    pub dir: PathBuf,
    /// The entry's name in `dir`.
    pub name: OsString,
    /// Who made the change.
    pub origin: Origin,
}

impl Event {
    /// `dir/name`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

/// Which kinds of events a mark asks for (a bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kinds(u64);

impl Kinds {
    /// Entries made.
    pub const CREATED: Kinds = Kinds(fan::CREATE);
    /// Entries renamed in.
    pub const MOVED_TO: Kinds = Kinds(fan::MOVED_TO);
    /// Entries renamed out.
    pub const MOVED_FROM: Kinds = Kinds(fan::MOVED_FROM);
    /// Entries removed.
    pub const DELETED: Kinds = Kinds(fan::DELETE);
    /// Files closed after writing.
    pub const CLOSED_WRITE: Kinds = Kinds(fan::CLOSE_WRITE);
    /// What a protected path needs: made, renamed into place, written.
    pub const DEFAULT: Kinds = Kinds(fan::CREATE | fan::MOVED_TO | fan::CLOSE_WRITE);

    /// Both sets.
    pub const fn with(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }
}

/// How exactly this watcher attributes changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribution {
    /// [`Origin::Tool`] or [`Origin::Other`], exactly (a privileged group
    /// read inside the tools PID namespace).
    Exact,
    /// [`Origin::Unknown`] for every change but the server's own.
    Unknown,
}

/// Why a watch could not be set.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// `fanotify_init` failed.
    #[error("cannot make a fanotify group: {0}")]
    Init(#[source] io::Error),
    /// A mark could not be added or removed.
    #[error("cannot {what} {path}: {source}")]
    Mark {
        /// `watch the filesystem of`, `watch the directory`, ...
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error (EPERM: a filesystem mark needs root).
        #[source]
        source: io::Error,
    },
    /// The namespace's reader could not be given the group.
    #[error("cannot hand the fanotify group to the tools PID namespace: {0}")]
    Attach(#[source] io::Error),
    /// Events could not be brought up to date.
    #[error("cannot bring the watcher's events up to date: {0}")]
    Sync(#[source] io::Error),
}

/// Every bit a mark of this crate may hold (what a removal clears).
const ALL_EVENTS: u64 = fan::CREATE
    | fan::MOVED_TO
    | fan::MOVED_FROM
    | fan::DELETE
    | fan::CLOSE_WRITE
    | fan::ONDIR
    | fan::EVENT_ON_CHILD;

/// At most this many undelivered events per subscriber; beyond, events are
/// dropped and one [`EventKind::Overflow`] is queued.
const QUEUE_MAX: usize = 1 << 16;

/// A subscriber's queue of events.
struct Queue {
    items: Mutex<(VecDeque<Event>, bool)>,
    ready: Condvar,
    notify: tokio::sync::Notify,
    closed: AtomicBool,
}

impl Queue {
    fn push(&self, ev: Event) {
        let mut g = self.items.lock_unpoisoned();
        let (items, overflowed) = &mut *g;
        if items.len() >= QUEUE_MAX {
            if !*overflowed {
                *overflowed = true;
                items.push_back(overflow_event());
            }
            return;
        }
        *overflowed = false;
        items.push_back(ev);
        drop(g);
        self.ready.notify_one();
        self.notify.notify_one();
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_all();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

fn overflow_event() -> Event {
    Event {
        kind: EventKind::Overflow,
        is_dir: false,
        dir: PathBuf::new(),
        name: OsString::new(),
        origin: Origin::Unknown,
    }
}

/// The events of one subscriber ([`Watcher::subscribe`]), in the order read.
pub struct Events {
    q: Arc<Queue>,
}

impl Events {
    /// The next event, if one is queued.
    pub fn try_recv(&self) -> Option<Event> {
        self.q.items.lock_unpoisoned().0.pop_front()
    }

    /// The next event, waiting up to `limit` (blocking).
    pub fn recv_timeout(&self, limit: Duration) -> Option<Event> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(e) = self.try_recv() {
                return Some(e);
            }
            if !self.wait(deadline.saturating_duration_since(Instant::now())) {
                return self.try_recv();
            }
        }
    }

    /// Waits up to `limit` until an event is queued, without taking it
    /// (blocking): whether one is. A consumer that must not be seen idle
    /// while it holds an event it took waits with this, then takes events
    /// under its own lock.
    pub fn wait(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut g = self.q.items.lock_unpoisoned();
        loop {
            if !g.0.is_empty() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || self.q.closed.load(Ordering::Acquire) {
                return false;
            }
            g = self
                .q
                .ready
                .wait_timeout(g, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The next event (async); `None` once the watcher is gone.
    pub async fn recv(&self) -> Option<Event> {
        loop {
            let notified = self.q.notify.notified();
            if let Some(e) = self.try_recv() {
                return Some(e);
            }
            if self.q.closed.load(Ordering::Acquire) {
                return None;
            }
            notified.await;
        }
    }
}

/// The places marked, and what resolves the handles events carry.
#[derive(Default)]
struct Marks {
    /// A descriptor on each filesystem marked (by `f_fsid`), for
    /// `open_by_handle_at`.
    mounts: HashMap<[i32; 2], OwnedFd>,
    /// Directories with an inode mark: their handle and path (how an
    /// unprivileged watcher, which cannot open handles, names them).
    dirs: HashMap<Fid, PathBuf>,
}

struct Inner {
    group: Arc<OwnedFd>,
    ns: Option<ToolsPidNs>,
    privileged: bool,
    own_pid: i32,
    marks: Mutex<Marks>,
    subscribers: Mutex<Vec<Weak<Queue>>>,
    others: AtomicBool,
    unresolved: AtomicU64,
    /// Without a namespace: the thread reading the group, woken by `wake`.
    direct: Option<Direct>,
    /// That thread's reads of the group started and finished (`quiet`).
    taking: AtomicU64,
    taken: AtomicU64,
}

/// The thread that reads the group itself (no tools namespace).
struct Direct {
    wake: OwnedFd,
    /// Flushes asked for and done.
    flush: Mutex<(u64, u64)>,
    flushed: Condvar,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A fanotify group and its marks. Cloning shares it; the group is closed
/// (and its marks gone) when the last clone is dropped.
#[derive(Clone)]
pub struct Watcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("attribution", &self.attribution())
            .finish()
    }
}

impl Watcher {
    /// A new group. With `ns`, and where the group is privileged
    /// (CAP_SYS_ADMIN in the initial user namespace), the namespace's reader
    /// reads it and attribution is exact; otherwise it is read here and
    /// origins are unknown.
    pub fn new(ns: Option<&ToolsPidNs>) -> Result<Watcher, WatchError> {
        let privileged = sys::privileged();
        let mut flags =
            fan::CLOEXEC | fan::NONBLOCK | fan::REPORT_FID | fan::REPORT_DIR_FID | fan::REPORT_NAME;
        if privileged {
            flags |= fan::UNLIMITED_QUEUE | fan::UNLIMITED_MARKS;
        }
        let group = Arc::new(sys::fanotify_init(flags).map_err(WatchError::Init)?);
        let ns = ns.filter(|_| privileged).cloned();
        let direct = match ns {
            Some(_) => None,
            None => {
                let (r, w) = sys::pipe().map_err(WatchError::Init)?;
                Some((r, w))
            }
        };
        let (wake_r, direct) = match direct {
            Some((r, w)) => (
                Some(r),
                Some(Direct {
                    wake: w,
                    flush: Mutex::new((0, 0)),
                    flushed: Condvar::new(),
                    stop: AtomicBool::new(false),
                    thread: Mutex::new(None),
                }),
            ),
            None => (None, None),
        };
        let inner = Arc::new(Inner {
            group: group.clone(),
            ns: ns.clone(),
            privileged,
            own_pid: std::process::id() as i32,
            marks: Mutex::new(Marks::default()),
            subscribers: Mutex::new(Vec::new()),
            others: AtomicBool::new(false),
            unresolved: AtomicU64::new(0),
            direct,
            taking: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        });
        match (&ns, wake_r) {
            (Some(ns), _) => {
                let weak = Arc::downgrade(&inner);
                let sink: crate::pidns::Sink = Arc::new(move |bytes: &[u8], unknown: bool| {
                    if let Some(me) = weak.upgrade() {
                        me.deliver(
                            bytes,
                            if unknown {
                                Read::Unknown
                            } else {
                                Read::InNamespace
                            },
                        );
                    }
                });
                ns.attach(group, sink).map_err(WatchError::Attach)?;
            }
            (None, Some(wake_r)) => {
                let weak = Arc::downgrade(&inner);
                let t = std::thread::Builder::new()
                    .name("toolsrv-watch".into())
                    .spawn(move || read_directly(weak, group, wake_r))
                    .map_err(WatchError::Init)?;
                if let Some(d) = &inner.direct {
                    *d.thread.lock_unpoisoned() = Some(t);
                }
            }
            (None, None) => {}
        }
        Ok(Watcher { inner })
    }

    /// How exactly changes are attributed.
    pub fn attribution(&self) -> Attribution {
        if self.inner.ns.is_some() {
            Attribution::Exact
        } else {
            Attribution::Unknown
        }
    }

    /// A new subscriber: from now on it receives every event (each
    /// subscriber gets its own copy).
    pub fn subscribe(&self) -> Events {
        let q = Arc::new(Queue {
            items: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
            notify: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
        });
        self.inner
            .subscribers
            .lock_unpoisoned()
            .push(Arc::downgrade(&q));
        Events { q }
    }

    /// Whether changes attributed to [`Origin::Other`] are delivered too
    /// (off at first: the tools' changes are what needs acting on).
    pub fn report_others(&self, on: bool) -> Result<(), WatchError> {
        self.inner.others.store(on, Ordering::Release);
        if let Some(ns) = &self.inner.ns {
            ns.set_others(on).map_err(WatchError::Attach)?;
        }
        Ok(())
    }

    /// Watches the whole filesystem `path` is on (`FAN_MARK_FILESYSTEM`):
    /// every directory of it, in every mount namespace. Needs a privileged
    /// group (EPERM otherwise).
    pub fn watch_filesystem(&self, path: &Path, kinds: Kinds) -> Result<(), WatchError> {
        self.mark(
            path,
            fan::MARK_ADD | fan::MARK_FILESYSTEM,
            kinds.0 | fan::ONDIR,
            "watch the filesystem of",
        )?;
        self.remember_mount(path);
        Ok(())
    }

    /// Stops watching `path`'s filesystem.
    pub fn unwatch_filesystem(&self, path: &Path) -> Result<(), WatchError> {
        self.mark(
            path,
            fan::MARK_REMOVE | fan::MARK_FILESYSTEM,
            ALL_EVENTS,
            "stop watching the filesystem of",
        )
    }

    /// Watches the entries of directory `dir` (an inode mark: its own
    /// entries, not those of its subdirectories; a symbolic link is not
    /// followed). Allowed to an unprivileged group.
    pub fn watch_dir(&self, dir: &Path, kinds: Kinds) -> Result<(), WatchError> {
        let c = cstring(dir);
        let (handle_type, handle) = sys::name_to_handle(&c).map_err(|source| WatchError::Mark {
            what: "watch the directory",
            path: dir.to_path_buf(),
            source,
        })?;
        self.mark(
            dir,
            fan::MARK_ADD | fan::MARK_ONLYDIR | fan::MARK_DONT_FOLLOW,
            kinds.0 | fan::ONDIR | fan::EVENT_ON_CHILD,
            "watch the directory",
        )?;
        let fsid = sys::open(&c, libc::O_PATH | libc::O_NOFOLLOW)
            .and_then(|fd| sys::fsid(fd.as_fd()))
            .ok();
        if let Some(fsid) = fsid {
            self.inner.marks.lock_unpoisoned().dirs.insert(
                Fid {
                    fsid,
                    handle_type,
                    handle,
                },
                dir.to_path_buf(),
            );
        }
        self.remember_mount(dir);
        Ok(())
    }

    /// Stops watching directory `dir`.
    pub fn unwatch_dir(&self, dir: &Path) -> Result<(), WatchError> {
        self.mark(
            dir,
            fan::MARK_REMOVE | fan::MARK_ONLYDIR | fan::MARK_DONT_FOLLOW,
            ALL_EVENTS,
            "stop watching the directory",
        )?;
        self.inner
            .marks
            .lock_unpoisoned()
            .dirs
            .retain(|_, p| p != dir);
        Ok(())
    }

    /// Returns once every event of a change made before the call has been
    /// delivered to the subscribers (waiting at most `limit`): call it before
    /// deciding that a run left nothing behind.
    pub fn sync(&self, limit: Duration) -> Result<(), WatchError> {
        if let Some(ns) = &self.inner.ns {
            return ns.flush(limit).map_err(WatchError::Sync);
        }
        let Some(d) = &self.inner.direct else {
            return Ok(());
        };
        let deadline = Instant::now() + limit;
        let mut g = d.flush.lock_unpoisoned();
        g.0 += 1;
        let seq = g.0;
        let _ = sys::write(d.wake.as_fd(), b"f");
        while g.1 < seq {
            let now = Instant::now();
            if now >= deadline {
                return Err(WatchError::Sync(io::Error::from(io::ErrorKind::TimedOut)));
            }
            g = d
                .flushed
                .wait_timeout(g, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        Ok(())
    }

    /// Whether every event of a change made before the call has already
    /// been delivered to the subscribers, told without a round trip (one or
    /// two `ioctl`s and a few atomic loads): when it is, [`Watcher::sync`]
    /// is not needed. `false` when it cannot be told.
    pub fn quiet(&self) -> bool {
        if let Some(ns) = &self.inner.ns {
            return ns.quiet(self.inner.group.as_fd());
        }
        if self.inner.direct.is_none() {
            return true;
        }
        if sys::queued(self.inner.group.as_raw_fd()).map_or(true, |n| n > 0) {
            return false;
        }
        self.inner.taking.load(Ordering::SeqCst) == self.inner.taken.load(Ordering::SeqCst)
    }

    /// How many events were dropped because their directory could not be
    /// named any more (removed before the event was read).
    pub fn unresolved(&self) -> u64 {
        self.inner.unresolved.load(Ordering::Relaxed)
    }

    fn mark(
        &self,
        path: &Path,
        flags: u32,
        mask: u64,
        what: &'static str,
    ) -> Result<(), WatchError> {
        sys::fanotify_mark(self.inner.group.as_fd(), flags, mask, &cstring(path)).map_err(
            |source| WatchError::Mark {
                what,
                path: path.to_path_buf(),
                source,
            },
        )
    }

    /// Keeps a descriptor on `path`'s filesystem for resolving handles (not
    /// `O_PATH`: `open_by_handle_at` refuses those).
    fn remember_mount(&self, path: &Path) {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let Ok(fd) = sys::open(&cstring(path), flags) else {
            return;
        };
        if let Ok(fsid) = sys::fsid(fd.as_fd()) {
            self.inner
                .marks
                .lock_unpoisoned()
                .mounts
                .entry(fsid)
                .or_insert(fd);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for q in self.subscribers.lock_unpoisoned().iter() {
            if let Some(q) = q.upgrade() {
                q.close();
            }
        }
        if let Some(d) = &self.direct {
            d.stop.store(true, Ordering::Release);
            let _ = sys::write(d.wake.as_fd(), b"s");
            if let Some(t) = d.thread.lock_unpoisoned().take() {
                if t.thread().id() != std::thread::current().id() {
                    let _ = t.join();
                }
            }
        }
    }
}

/// Who read the events.
#[derive(Clone, Copy)]
enum Read {
    /// The tools namespace's reader: pid 0 is someone else's change.
    InNamespace,
    /// The reader, for events queued before it ran: unknown.
    Unknown,
    /// This process: only its own pid tells anything.
    Here,
}

impl Inner {
    /// Decodes, attributes, names and hands out what was read.
    fn deliver(&self, bytes: &[u8], read: Read) {
        let events = match fid::decode(bytes) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "undecodable fanotify events; treating them as lost");
                vec![RawEvent {
                    mask: fan::Q_OVERFLOW,
                    pid: 0,
                    dir: None,
                    object: None,
                }]
            }
        };
        let others = self.others.load(Ordering::Acquire);
        let mut out = Vec::new();
        for ev in events {
            let origin = match read {
                Read::InNamespace if ev.pid != 0 => Origin::Tool { pid: ev.pid },
                Read::InNamespace => Origin::Other,
                Read::Unknown => Origin::Unknown,
                Read::Here if ev.pid == self.own_pid => Origin::Other,
                Read::Here => Origin::Unknown,
            };
            if ev.mask & fan::Q_OVERFLOW != 0 {
                out.push(overflow_event());
                continue;
            }
            if origin == Origin::Other && !others {
                continue;
            }
            let Some((dir_fid, name)) = &ev.dir else {
                continue;
            };
            let Some(dir) = self.resolve(dir_fid) else {
                self.unresolved.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let is_dir = ev.mask & fan::ONDIR != 0;
            for (bit, kind) in [
                (fan::CREATE, EventKind::Created),
                (fan::MOVED_FROM, EventKind::MovedFrom),
                (fan::MOVED_TO, EventKind::MovedTo),
                (fan::CLOSE_WRITE, EventKind::ClosedWrite),
                (fan::DELETE, EventKind::Deleted),
            ] {
                if ev.mask & bit != 0 {
                    out.push(Event {
                        kind,
                        is_dir,
                        dir: dir.clone(),
                        name: OsString::from_vec(name.clone()),
                        origin,
                    });
                }
            }
        }
        if out.is_empty() {
            return;
        }
        let mut subs = self.subscribers.lock_unpoisoned();
        subs.retain(|w| w.strong_count() > 0);
        for q in subs.iter().filter_map(Weak::upgrade) {
            for e in &out {
                q.push(e.clone());
            }
        }
    }

    /// The path of the directory `fid` names, as this process sees it now.
    fn resolve(&self, fid: &Fid) -> Option<PathBuf> {
        let marks = self.marks.lock_unpoisoned();
        if self.privileged {
            if let Some(mount) = marks.mounts.get(&fid.fsid) {
                if let Ok(fd) = sys::open_by_handle(mount.as_fd(), fid.handle_type, &fid.handle) {
                    return fd_path(&fd);
                }
            }
        }
        marks.dirs.get(fid).cloned()
    }
}

/// The path the kernel gives an open descriptor (`None` for one whose file
/// was removed).
fn fd_path(fd: &OwnedFd) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    if !p.is_absolute() || p.as_os_str().as_bytes().ends_with(b" (deleted)") {
        return None;
    }
    Some(p)
}

fn cstring(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_else(|_| CString::from(c"\u{1}"))
}

/// Reads the group on this thread (no tools namespace) until the watcher is
/// gone, answering flushes.
fn read_directly(inner: Weak<Inner>, group: Arc<OwnedFd>, wake: OwnedFd) {
    let mut buf = vec![0u8; crate::proto::EVENTS_MAX];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: group.as_raw_fd(),
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
            return;
        }
        let Some(me) = inner.upgrade() else { return };
        let Some(d) = &me.direct else { return };
        if d.stop.load(Ordering::Acquire) {
            return;
        }
        let asked = if fds[1].revents != 0 {
            let mut b = [0u8; 64];
            let _ = sys::read(wake.as_raw_fd(), &mut b);
            Some(d.flush.lock_unpoisoned().0)
        } else {
            None
        };
        // Counted from before the first read (what is not read yet is
        // still queued in the group) to after the last delivery: `quiet`.
        me.taking.fetch_add(1, Ordering::SeqCst);
        loop {
            match sys::read(group.as_raw_fd(), &mut buf) {
                Ok(0) => break,
                Ok(n) => me.deliver(&buf[..n], Read::Here),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => break,
            }
        }
        me.taken.fetch_add(1, Ordering::SeqCst);
        if let Some(seq) = asked {
            let mut g = d.flush.lock_unpoisoned();
            g.1 = g.1.max(seq);
            drop(g);
            d.flushed.notify_all();
        }
    }
}
