//! Helpers shared by the spawn and confinement integration tests.
#![allow(dead_code)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use toolsrv_sandbox::{spawn, Child, ExitStatus, SpawnError, SpawnSpec};
use toolsrv_sandbox::{Confinement, View};

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // Safety: pipe2 writes two descriptors into `fds`.
    let ret = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(ret, 0, "pipe2: {}", std::io::Error::last_os_error());
    // Safety: both descriptors are fresh and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in test string")
}

/// The environment handed to tools in tests.
pub fn test_env() -> Vec<CString> {
    vec![cstr("PATH=/usr/local/bin:/usr/bin:/bin"), cstr("LC_ALL=C")]
}

/// Starts `argv` (argv[0] is the program path) writing into a fresh pipe.
pub fn start(
    argv: &[&str],
    cwd: &str,
    confinement: Option<&Confinement>,
) -> Result<(Child, OwnedFd), SpawnError> {
    start_with(spawn, argv, cwd, &[], confinement)
}

/// Starts `argv` with `spawn_fn` (`spawn` or `spawn_detached`), the test
/// environment plus `env` (`NAME=value`), writing into a fresh pipe.
pub fn start_with(
    spawn_fn: fn(&SpawnSpec) -> Result<Child, SpawnError>,
    argv: &[&str],
    cwd: &str,
    env: &[&str],
    confinement: Option<&Confinement>,
) -> Result<(Child, OwnedFd), SpawnError> {
    start_with_files(spawn_fn, argv, cwd, env, &[], confinement)
}

/// [`start_with`], the tool getting `files` as its descriptors 3, 4, ….
pub fn start_with_files(
    spawn_fn: fn(&SpawnSpec) -> Result<Child, SpawnError>,
    argv: &[&str],
    cwd: &str,
    env: &[&str],
    files: &[std::os::fd::BorrowedFd<'_>],
    confinement: Option<&Confinement>,
) -> Result<(Child, OwnedFd), SpawnError> {
    let (r, w) = pipe();
    let argv_c: Vec<CString> = argv.iter().map(|a| cstr(a)).collect();
    let mut envp = test_env();
    envp.extend(env.iter().map(|e| cstr(e)));
    let cwd_c = cstr(cwd);
    let spec = SpawnSpec {
        program: &argv_c[0],
        argv: &argv_c,
        envp: &envp,
        cwd: &cwd_c,
        cwd_fd: None,
        mount_ns: None,
        net_ns: None,
        user_ns: None,
        stdin: None,
        output: w.as_fd(),
        files,
        confinement,
        join: Default::default(),
    };
    let child = spawn_fn(&spec)?;
    drop(w);
    Ok((child, r))
}

/// Runs `argv` to completion: (status, merged output).
pub fn run(
    argv: &[&str],
    cwd: &str,
    confinement: Option<&Confinement>,
) -> Result<(ExitStatus, String), SpawnError> {
    // A script a test just wrote is "busy" (ETXTBSY) while another test's
    // child, forked in that moment, still holds the write descriptor it
    // inherited (it closes it only at its own exec): try again, bounded.
    let mut tries = 0;
    let (mut child, r) = loop {
        match start(argv, cwd, confinement) {
            Err(SpawnError::Start { source, .. })
                if source.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other?,
        }
    };
    let mut out = String::new();
    std::fs::File::from(r)
        .read_to_string(&mut out)
        .expect("read tool output");
    let status = child.wait().expect("wait for tool");
    Ok((status, out))
}

/// Runs `sh -c script`.
pub fn sh(script: &str, cwd: &str, confinement: Option<&Confinement>) -> (ExitStatus, String) {
    run(&["/bin/sh", "-c", script], cwd, confinement).expect("spawn /bin/sh")
}

/// The probe example binary (built by `cargo test`).
pub fn probe() -> PathBuf {
    toolsrv_testkit::example("confine_probe")
}

/// Runs the probe with `args`, returning its single output line.
pub fn run_probe(args: &[&str], confinement: Option<&Confinement>) -> String {
    let probe = probe();
    let probe_s = probe.to_str().expect("utf-8 target path");
    let mut argv = vec![probe_s];
    argv.extend_from_slice(args);
    let (status, out) = run(&argv, "/", confinement).expect("spawn probe");
    assert_eq!(status, ExitStatus::Code(0), "probe {args:?} output: {out}");
    out.trim().to_string()
}

/// Waits (bounded) until the process `pid` has exited, using a pidfd.
pub fn wait_gone(pid: i32, timeout_ms: i32) -> bool {
    // Safety: pidfd_open has no memory arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        // ESRCH: already gone (and reaped).
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // Safety: fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut pfd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: polls one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    n == 1
}

/// Rules that let tools run (system binaries and libraries, the probe) and nothing else.
pub fn base_rules() -> toolsrv_sandbox::ResolvedRules {
    let probe_dir = probe().parent().expect("examples dir").to_path_buf();
    let mut rox: Vec<PathBuf> = ["/usr", "/bin", "/lib", "/lib64", "/sbin"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    rox.push(probe_dir);
    toolsrv_sandbox::ResolvedRules {
        ro: vec![PathBuf::from("/etc")],
        rox,
        // A single-file rw rule: shells open /dev/null for background jobs.
        rw: vec![PathBuf::from("/dev/null")],
        rwx: Vec::new(),
        list: Vec::new(),
        network: toolsrv_sandbox::NetworkRules {
            enabled: true,
            bind_tcp: Vec::new(),
            connect_tcp: Vec::new(),
            stream_only: false,
        },
        best_effort: false,
        keyrings: false,
        degraded: false,
        workdir: None,
        ids: Default::default(),
        view_roots: Default::default(),
    }
}

/// Prepares a confinement, failing the test on error.
pub fn confine(rules: &toolsrv_sandbox::ResolvedRules) -> Confinement {
    Confinement::prepare(rules).expect("prepare confinement")
}

/// The value of field `name` (e.g. `"SigIgn:"`) in `/proc/<pid>/status` text.
pub fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_string())
        .expect("status field")
}

/// Runs `sh -c script` inside `view` (and its tools' user namespace, if it
/// has one), in its workspace: (status, output).
pub fn sh_in_view(view: &View, script: &str) -> (ExitStatus, String) {
    let (r, w) = pipe();
    let argv: Vec<CString> = ["/bin/sh", "-c", script].iter().map(|a| cstr(a)).collect();
    let envp = test_env();
    let cwd = cstr(&view.workspace().path().display().to_string());
    let spec = SpawnSpec {
        program: &argv[0],
        argv: &argv,
        envp: &envp,
        cwd: &cwd,
        cwd_fd: Some(view.workspace().fd()),
        mount_ns: Some(view.ns()),
        net_ns: None,
        user_ns: view.user_ns(),
        stdin: None,
        output: w.as_fd(),
        files: &[],
        confinement: None,
        join: Default::default(),
    };
    let mut child = spawn(&spec).expect("spawn in the view");
    drop(w);
    let mut out = String::new();
    std::fs::File::from(r).read_to_string(&mut out).unwrap();
    (child.wait().unwrap(), out)
}
