//! Run networks made ahead (docs/network.md, "Cost"): making a namespace,
//! its routes and listeners takes about a millisecond, so each policy
//! under `network.domains` keeps a few ready, and a thread of the server
//! makes the next one while a run uses the last. A run takes one in the
//! time of a lock; only when none is ready is one made on the spot. The
//! server keeps a few networks between runs (served, for the next run),
//! counted as lent, so a steady stream of runs makes no new namespace.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::{make, NetworkError, RunNetwork};

/// How many networks a pool keeps ready.
pub const DEPTH: usize = 4;

/// A policy's ready networks, all with the same capture ports.
#[derive(Debug, Clone)]
pub struct NetworkPool(Arc<Pool>);

#[derive(Debug)]
struct Pool {
    ports: Vec<u16>,
    ready: Mutex<Vec<RunNetwork>>,
    /// Networks taken and still in use (the server keeps a few between
    /// runs): the pool makes new ones only up to [`DEPTH`] with these
    /// counted.
    lent: std::sync::atomic::AtomicUsize,
}

impl NetworkPool {
    /// A pool for networks capturing `ports`, filled from now on.
    pub fn new(ports: &[u16]) -> NetworkPool {
        let pool = NetworkPool(Arc::new(Pool {
            ports: super::capture_ports(ports),
            ready: Mutex::new(Vec::with_capacity(DEPTH)),
            lent: std::sync::atomic::AtomicUsize::new(0),
        }));
        pool.refill();
        pool
    }

    /// A ready network, if one is (the pool is refilled either way). It
    /// counts as lent until [`NetworkPool::forget`] says it is dropped.
    pub fn take(&self) -> Option<RunNetwork> {
        let got = self.0.ready.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if got.is_some() {
            self.0.lent.fetch_add(1, Ordering::AcqRel);
        }
        self.refill();
        got
    }

    /// A network lent by [`NetworkPool::take`] or [`NetworkPool::make_now`]
    /// is dropped: the pool may make another.
    pub fn forget(&self) {
        let _ = self
            .0
            .lent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        self.refill();
    }

    /// A network made now on the maker thread (blocks until it is made):
    /// for a run that found none ready.
    pub fn make_now(&self) -> Result<RunNetwork, NetworkError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let unavailable = || NetworkError {
            step: "the thread that makes run networks",
            source: std::io::Error::other("it is not running"),
        };
        let queue = maker().ok_or_else(unavailable)?;
        queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Job::Make(self.0.ports.clone(), tx))
            .map_err(|_| unavailable())?;
        let made = rx.recv().map_err(|_| unavailable())??;
        self.0.lent.fetch_add(1, Ordering::AcqRel);
        Ok(made)
    }

    fn refill(&self) {
        if let Some(tx) = maker() {
            let _ = tx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Job::Fill(Arc::downgrade(&self.0)));
        }
    }
}

/// Starts the thread that makes run networks, once. Call it before any
/// thread of the server carries the tools' seccomp filter: a thread
/// inherits its creator's, and the filter's socket rules are not the
/// server's.
pub fn start_maker() {
    let _ = maker();
}

/// What the maker thread is asked.
enum Job {
    /// Fill the pool up to [`DEPTH`].
    Fill(Weak<Pool>),
    /// Make one with these ports, answered on the channel.
    Make(Vec<u16>, mpsc::SyncSender<Result<RunNetwork, NetworkError>>),
}

type Queue = Mutex<mpsc::Sender<Job>>;

/// The maker thread's queue, the thread started on first use. Its own
/// network namespace is replaced by each network it makes; nothing else
/// runs on it.
fn maker() -> Option<&'static Queue> {
    static MAKER: OnceLock<Option<Queue>> = OnceLock::new();
    MAKER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("toolsrv-netns".into())
                .spawn(move || {
                    for job in rx {
                        match job {
                            Job::Fill(pool) => fill(&pool),
                            Job::Make(ports, reply) => {
                                let _ = reply.send(make(&ports));
                            }
                        }
                    }
                });
            match started {
                Ok(_) => Some(Mutex::new(tx)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the thread that makes run networks");
                    None
                }
            }
        })
        .as_ref()
}

/// Makes networks for `pool` until it holds [`DEPTH`] (or it is gone, or
/// making one fails: logged, and the next take tries again).
fn fill(pool: &Weak<Pool>) {
    loop {
        let Some(p) = pool.upgrade() else { return };
        let ready = p.ready.lock().unwrap_or_else(|e| e.into_inner()).len();
        if ready + p.lent.load(Ordering::Acquire) >= DEPTH {
            return;
        }
        match make(&p.ports) {
            Ok(n) => p.ready.lock().unwrap_or_else(|e| e.into_inner()).push(n),
            Err(e) => {
                tracing::warn!(error = %e, "cannot make a run network ahead");
                return;
            }
        }
    }
}
