//! Baselines without toolsrv, run by the bench process itself: fork+exec+wait
//! of a command through `std::process::Command` or `posix_spawn`, `bwrap`
//! around a command, and a process's resident memory.

use std::ffi::CString;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::sys;

/// Why a bare run did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum BareError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: io::Error,
    },
    /// It ran but did not exit 0.
    #[error("{program} exited with {status}: {stderr}")]
    Failed {
        /// The program.
        program: String,
        /// How it ended.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// An argument held a NUL byte.
    #[error("argument {0:?} holds a NUL byte")]
    Nul(String),
}

/// Run `argv` with `std::process::Command` (fork/exec or posix_spawn, as std
/// decides), stdin `/dev/null`, stdout and stderr captured through pipes as
/// toolsrv captures a tool's output, and wait for it. Fails unless it exits 0.
pub fn command(argv: &[&str]) -> Result<(), BareError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| BareError::Nul(String::new()))?;
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BareError::Start {
            program: program.to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BareError::Failed {
            program: program.to_string(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// A prepared `posix_spawn` of one command (absolute path, empty environment,
/// stdio inherited), run and waited for on each [`PosixSpawn::run`].
#[derive(Debug)]
pub struct PosixSpawn {
    program: String,
    argv: Vec<CString>,
}

impl PosixSpawn {
    /// Prepare `argv` (`argv[0]` is the absolute program path).
    pub fn new(argv: &[&str]) -> Result<PosixSpawn, BareError> {
        let argv = argv
            .iter()
            .map(|a| CString::new(*a).map_err(|_| BareError::Nul(a.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err(BareError::Nul(String::new()));
        }
        Ok(PosixSpawn {
            program: argv[0].to_string_lossy().into_owned(),
            argv,
        })
    }

    /// Spawn it, wait for it, and fail unless it exited 0.
    pub fn run(&self) -> Result<(), BareError> {
        let pid = sys::posix_spawn(&self.argv).map_err(|source| BareError::Start {
            program: self.program.clone(),
            source,
        })?;
        let status = loop {
            match sys::waitpid(pid) {
                Ok(status) => break status,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(BareError::Start {
                        program: self.program.clone(),
                        source,
                    })
                }
            }
        };
        if sys::exited_zero(status) {
            Ok(())
        } else {
            Err(BareError::Failed {
                program: self.program.clone(),
                status: format!("wait status {status:#x}"),
                stderr: String::new(),
            })
        }
    }
}

/// The `bwrap` arguments that wrap a command in a read-only root with a
/// private `/tmp`, `/dev` and `/proc`.
pub const BWRAP_ARGS: &[&str] = &[
    "--ro-bind",
    "/",
    "/",
    "--tmpfs",
    "/tmp",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
];

/// `bwrap BWRAP_ARGS... argv...` as an argv.
pub fn bwrap_argv<'a>(bwrap: &'a str, argv: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![bwrap];
    v.extend_from_slice(BWRAP_ARGS);
    v.extend_from_slice(argv);
    v
}

/// The resident set size (`VmRSS`) of process `pid`, in bytes.
pub fn vm_rss(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::other(format!("no VmRSS line in /proc/{pid}/status")))
}

/// CPU time used by process `pid`: its own (user + system) and that of its
/// reaped children (`cutime` + `cstime`), from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> io::Result<(std::time::Duration, std::time::Duration)> {
    let stat = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))?;
    let bad = || io::Error::other(format!("cannot parse /proc/{pid}/stat"));
    let rest = stat
        .get(stat.rfind(')').ok_or_else(bad)? + 1..)
        .ok_or_else(bad)?;
    // After the command: state (field 3) is index 0, utime (field 14) index 11.
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|v| v.parse().map_err(|_| bad()))
        .collect::<io::Result<_>>()?;
    if f.len() != 4 {
        return Err(bad());
    }
    let tck = sys::clock_ticks();
    let tck = u64::try_from(tck).ok().filter(|&t| t > 0).ok_or_else(bad)?;
    let d = |ticks: u64| std::time::Duration::from_nanos(ticks * 1_000_000_000 / tck);
    Ok((d(f[0] + f[1]), d(f[2] + f[3])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_runs_and_reports_failure() {
        command(&["/bin/true"]).expect("true");
        let e = command(&["/bin/sh", "-c", "echo oops >&2; exit 3"]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("exit status: 3") && msg.contains("oops"),
            "{msg}"
        );
        assert!(matches!(
            command(&["/nonexistent/prog"]),
            Err(BareError::Start { .. })
        ));
    }

    #[test]
    fn posix_spawn_runs_and_reports_failure() {
        PosixSpawn::new(&["/bin/sh", "-c", "true"])
            .expect("prepare")
            .run()
            .expect("sh -c true");
        let e = PosixSpawn::new(&["/bin/sh", "-c", "exit 4"])
            .expect("prepare")
            .run()
            .unwrap_err();
        assert!(e.to_string().contains("wait status 0x400"), "{e}");
        assert!(PosixSpawn::new(&["/bin/t\0rue"]).is_err());
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let me = std::process::id();
        let (own0, _) = cpu_time(me).expect("cpu");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_time(me).expect("cpu").0 <= own0 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(7));
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "{x}");
        }
        command(&[
            "/bin/sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ])
        .expect("busy child");
        let (_, kids) = cpu_time(me).expect("cpu");
        assert!(kids > std::time::Duration::ZERO, "{kids:?}");
    }

    #[test]
    fn own_rss_is_positive_and_bwrap_argv_wraps() {
        let rss = vm_rss(std::process::id()).expect("own VmRSS");
        assert!(rss > 1024 * 1024, "{rss}");
        assert_eq!(
            bwrap_argv("bwrap", &["/bin/true"]).join(" "),
            "bwrap --ro-bind / / --tmpfs /tmp --dev /dev --proc /proc /bin/true"
        );
    }
}
