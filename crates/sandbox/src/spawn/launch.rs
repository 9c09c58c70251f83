//! What a detached child reads until it execs (see [`super::spawn_detached`]):
//! owned copies of the strings, their pointer arrays, the seccomp program and
//! the child's arguments, kept by the [`super::Child`] so that the spawning
//! thread need not wait for the child's `execve`; and the stack it runs on,
//! lent from a pool.
//!
//! The kernel clears [`Launch::in_use`] (`CLONE_CHILD_CLEARTID`) when the
//! child's hold on the shared memory ends: at `execve` or at exit. Until then
//! nothing here may be freed or changed. A `Launch` dropped earlier (its
//! `Child` dropped unreaped) is parked, and a lent stack stays lent; every
//! spawn first frees the parked launches and takes back the lent stacks whose
//! children are done, so a long-running tool does not keep a stack.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use libc::c_char;
use toolsrv_base::LockUnpoisoned;

use super::args::{child_args, null_terminated, seccomp_fprog, ChildStrings};
use super::child::ChildArgs;
use super::error::{child_error, SpawnError};
use super::spec::SpawnSpec;
use super::stack::ChildStack;

/// The memory of one detached child.
pub(crate) struct Launch {
    /// The child's arguments; points into the fields below.
    pub(crate) args: ChildArgs,
    /// 1 until the kernel clears it at the child's `execve` or exit; shared
    /// with the lent stack's record.
    pub(crate) in_use: Arc<AtomicU32>,
    program: CString,
    cwd: CString,
    /// argv then envp strings, owned.
    _strings: Vec<CString>,
    _argv: Vec<*const c_char>,
    _envp: Vec<*const c_char>,
    _filter: Option<Vec<libc::sock_filter>>,
    _fprog: Option<Box<libc::sock_fprog>>,
}

// Safety: the raw pointers point into heap buffers this value owns (and never
// changes after construction); nothing here is tied to a thread.
unsafe impl Send for Launch {}
// Safety: as above; shared access only reads, or uses atomics.
unsafe impl Sync for Launch {}

impl Launch {
    /// Copy what `spec` says into a new launch, with `stdin`, `output` and
    /// `files` as the child's descriptors.
    pub(crate) fn new(
        spec: &SpawnSpec,
        stdin: i32,
        output: i32,
        files: [i32; super::spec::MAX_FILES],
    ) -> Result<Box<Launch>, SpawnError> {
        let strings: Vec<CString> = spec.argv.iter().chain(spec.envp).cloned().collect();
        let (argv_s, envp_s) = strings.split_at(spec.argv.len());
        let argv = null_terminated(argv_s);
        let envp = null_terminated(envp_s);
        let filter: Option<Vec<libc::sock_filter>> = spec
            .confinement
            .and_then(crate::confine::Confinement::seccomp_program)
            .map(<[libc::sock_filter]>::to_vec);
        let fprog = filter
            .as_deref()
            .map(seccomp_fprog)
            .transpose()?
            .map(Box::new);
        let program = spec.program.to_owned();
        let cwd = spec.cwd.to_owned();
        let args = child_args(
            ChildStrings {
                program: &program,
                argv: &argv,
                envp: &envp,
                cwd: &cwd,
                cwd_fd: spec
                    .cwd_fd
                    .map_or(-1, |fd| std::os::fd::AsRawFd::as_raw_fd(&fd)),
                mount_ns: spec
                    .mount_ns
                    .map_or(-1, |fd| std::os::fd::AsRawFd::as_raw_fd(&fd)),
                net_ns: spec
                    .net_ns
                    .map_or(-1, |fd| std::os::fd::AsRawFd::as_raw_fd(&fd)),
                user_ns: spec
                    .user_ns
                    .map_or(-1, |fd| std::os::fd::AsRawFd::as_raw_fd(&fd)),
            },
            stdin,
            output,
            files,
            spec.confinement,
            fprog.as_deref(),
            &spec.join,
        );
        Ok(Box::new(Launch {
            args,
            in_use: Arc::new(AtomicU32::new(1)),
            program,
            cwd,
            _strings: strings,
            _argv: argv,
            _envp: envp,
            _filter: filter,
            _fprog: fprog,
        }))
    }

    /// Whether the child may still read this memory.
    fn busy(&self) -> bool {
        self.in_use.load(Ordering::Acquire) != 0
    }

    /// The setup failure the child reported before exiting, if any: call
    /// only once it has exited.
    pub(crate) fn failure(&self) -> Option<SpawnError> {
        let stage = self.args.failed_stage.load(Ordering::Acquire);
        (stage != 0).then(|| {
            let errno = self.args.failed_errno.load(Ordering::Relaxed);
            child_error(&self.program, &self.cwd, stage, errno)
        })
    }

    /// The program path (for messages).
    pub(crate) fn program(&self) -> &CStr {
        &self.program
    }
}

/// Launches whose `Child` went away while the child could still read them.
/// Boxed: the child reads a launch at its address, which must not move.
#[allow(clippy::vec_box)]
static PARKED: Mutex<Vec<Box<Launch>>> = Mutex::new(Vec::new());
/// Stacks children may still run on, each with its child's `in_use` word.
static LENT: Mutex<Vec<(ChildStack, Arc<AtomicU32>)>> = Mutex::new(Vec::new());
/// Stacks no child runs on, for the next ones.
static POOL: Mutex<Vec<ChildStack>> = Mutex::new(Vec::new());
/// The most stacks kept for reuse.
const MAX_POOLED_STACKS: usize = 32;

/// Free `launch` now if the child is done with it, else park it.
pub(crate) fn retire(launch: Box<Launch>) {
    if launch.busy() {
        PARKED.lock_unpoisoned().push(launch);
    }
}

/// Free `launch`, for which no child was made (`clone3` failed).
pub(crate) fn discard(launch: Box<Launch>) {
    launch.in_use.store(0, Ordering::Release);
    retire(launch);
}

/// A stack for a new child: from the pool, or a new one. Frees the parked
/// launches and takes back the lent stacks whose children are done first.
pub(crate) fn take_stack() -> std::io::Result<ChildStack> {
    let done: Vec<Box<Launch>> = {
        let mut parked = PARKED.lock_unpoisoned();
        let (busy, done) = std::mem::take(&mut *parked)
            .into_iter()
            .partition(|l| l.busy());
        *parked = busy;
        done
    };
    drop(done);
    let returned: Vec<ChildStack> = {
        let mut lent = LENT.lock_unpoisoned();
        let (busy, done): (Vec<_>, Vec<_>) = std::mem::take(&mut *lent)
            .into_iter()
            .partition(|(_, in_use)| in_use.load(Ordering::Acquire) != 0);
        *lent = busy;
        done.into_iter().map(|(stack, _)| stack).collect()
    };
    let mut pool = POOL.lock_unpoisoned();
    for stack in returned {
        give_back_locked(&mut pool, stack);
    }
    match pool.pop() {
        Some(stack) => Ok(stack),
        None => ChildStack::new(),
    }
}

/// `stack` now runs the child holding `in_use`, until it execs or exits.
pub(crate) fn lend(stack: ChildStack, in_use: Arc<AtomicU32>) {
    LENT.lock_unpoisoned().push((stack, in_use));
}

/// No child got `stack` (`clone3` failed).
pub(crate) fn give_back(stack: ChildStack) {
    give_back_locked(&mut POOL.lock_unpoisoned(), stack);
}

/// Pool `stack`, or unmap it (dropped) when the pool is full.
fn give_back_locked(pool: &mut Vec<ChildStack>, stack: ChildStack) {
    if pool.len() < MAX_POOLED_STACKS {
        pool.push(stack);
    }
}
