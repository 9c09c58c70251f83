//! The remote `toolsrv serve`: its private directories, the pinned secret,
//! start (detached, under a small `sh` wrapper that records the server's pid
//! and exit status), health, and stop.
//!
//! Files in the state directory (`<remote state>/server-<hash>/`, 0700):
//! `secret` (0600), `config/`, `pid`, `wpid` (the wrapper), `exit` (the
//! server's exit status), `server.log`, `wrapper.log`.
//!
//! Which process is the server is decided by the local record
//! ([`ServerProcess`]: pid, start time, executable, taken when it started),
//! never by the remote `pid` file alone: health checks and stops compare the
//! live process with the record first, so a pid file that names another
//! process makes nothing else look alive, and nothing else gets a signal.

use crate::error::RemoteError;
use crate::quote::sh;
use crate::ssh::{Input, Ssh};
use crate::state::{RemoteServer, ServerProcess};

/// A shell function: `ident PID` prints `<start time> <executable>` of the
/// live process PID (`/proc/PID/stat` field 22, `/proc/PID/exe` without a
/// ` (deleted)` suffix), and fails for anything that is not a pid above 1, a
/// process that is gone, or a zombie.
const IDENT: &str = r#"ident() {
  case "$1" in ''|*[!0-9]*) return 1 ;; esac
  [ "$1" -gt 1 ] || return 1
  _s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  _e=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  _e=${_e% (deleted)}
  _s=${_s##*) }
  set -- $_s
  [ -n "${20:-}" ] || return 1
  echo "${20} $_e"
}
"#;

/// `want_pid` and `want` (the record's `<start time> <executable>`) as
/// shell assignments; empty without a record.
fn record_vars(p: Option<&ServerProcess>) -> String {
    match p {
        Some(p) => format!(
            "want_pid={}
want={}
",
            p.pid,
            sh(&format!("{} {}", p.start_time, p.exe))
        ),
        None => "want_pid=
want=
"
        .into(),
    }
}

/// What the remote server is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Running with this OS pid.
    Running(u32),
    /// Ended with this status (0: idle timeout or SIGTERM; 137: SIGKILL).
    Exited(i32),
    /// Ended, the wrapper has not recorded the status yet.
    Stopping,
    /// No trace of it (never started, or its files are gone).
    Gone,
}

/// The `--env` prelude plus the server's paths as shell variables.
fn head(prelude: &str, s: &RemoteServer) -> String {
    format!(
        "{prelude}st={}\ncfg={}\nsock={}\n",
        sh(&s.state_dir),
        sh(&s.config_dir),
        sh(&s.socket)
    )
}

/// Parse `started <pid> <start time> <exe>` (the last such line of `out`).
fn parse_started(out: &str) -> Result<ServerProcess, RemoteError> {
    let line = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("started "))
        .ok_or_else(|| RemoteError::ServerNotRecorded(out.trim().to_string()))?;
    let mut w = line.splitn(3, ' ');
    let (pid, start_time, exe) = (w.next(), w.next(), w.next());
    match (
        pid.and_then(|p| p.parse::<u32>().ok()),
        start_time.and_then(|t| t.parse::<u64>().ok()),
        exe,
    ) {
        (Some(pid), Some(start_time), Some(exe)) if pid > 1 && !exe.is_empty() => {
            Ok(ServerProcess {
                pid,
                start_time,
                exe: exe.to_string(),
            })
        }
        _ => Err(RemoteError::BadProcessRecord(line.to_string())),
    }
}

/// Create the remote state directory and the server's state directory in
/// it, 0700, refusing ones another uid owns.
pub fn prepare(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<(), RemoteError> {
    let mut script = head(prelude, s);
    if let Some(rt) = &s.runtime_dir {
        script.push_str(&format!(
            "rt={}\nmkdir -p \"$rt\"\n[ -O \"$rt\" ] || {{ echo \"$rt is not owned by uid $(id -u)\" >&2; exit 1; }}\nchmod 700 \"$rt\"\n",
            sh(rt)
        ));
    }
    script.push_str(
        "mkdir -p \"$st\"\n[ -O \"$st\" ] || { echo \"$st is not owned by uid $(id -u)\" >&2; exit 1; }\nchmod 700 \"$st\"\n",
    );
    ssh.run(&script, Input::None).map(drop)
}

/// Create the default remote `--cwd` ([`crate::up::DEFAULT_WORKSPACE`]) when
/// missing, refusing one another uid owns.
pub fn workspace(ssh: &Ssh, prelude: &str, cwd: &str) -> Result<(), RemoteError> {
    let script = format!(
        "{prelude}w={}\nmkdir -p \"$w\"\n[ -O \"$w\" ] || {{ echo \"$w is not owned by uid $(id -u)\" >&2; exit 1; }}\n",
        sh(cwd)
    );
    ssh.run(&script, Input::None).map(drop)
}

/// Write the secret (over the SSH channel, never on a command line) to
/// `<state>/secret`, 0600; whether it changed.
pub fn write_secret(
    ssh: &Ssh,
    prelude: &str,
    s: &RemoteServer,
    secret: &str,
) -> Result<bool, RemoteError> {
    let script = format!(
        "{}cat > \"$st/secret.new\"\nif cmp -s \"$st/secret.new\" \"$st/secret\" 2>/dev/null; then rm -f \"$st/secret.new\"; echo same; else mv -f \"$st/secret.new\" \"$st/secret\"; echo changed; fi\n",
        head(prelude, s)
    );
    let out = ssh.run(&script, Input::Bytes(format!("{secret}\n").as_bytes()))?;
    Ok(out.trim() == "changed")
}

/// The server's health. With a record, the server runs when the recorded
/// process lives and is the one recorded; without one (a server this host
/// did not record), when the pid file names a live process.
pub fn health(
    ssh: &Ssh,
    prelude: &str,
    s: &RemoteServer,
    process: Option<&ServerProcess>,
) -> Result<Health, RemoteError> {
    let script = format!(
        r#"{head}{IDENT}{record}fp=$(cat "$st/pid" 2>/dev/null)
wp=$(cat "$st/wpid" 2>/dev/null)
if [ -n "$want_pid" ] && [ "$(ident "$want_pid")" = "$want" ]; then echo "running $want_pid"
elif [ -z "$want_pid" ] && ident "$fp" >/dev/null; then echo "running $fp"
elif [ -f "$st/exit" ]; then echo "exited $(cat "$st/exit")"
elif ident "$wp" >/dev/null; then echo stopping
else echo gone; fi
"#,
        head = head(prelude, s),
        record = record_vars(process),
    );
    let out = ssh.run(&script, Input::None)?;
    let out = out.trim();
    let num = |p: &str| {
        out.strip_prefix(p)
            .and_then(|n| n.trim().parse::<i64>().ok())
    };
    Ok(
        if let Some(pid) = num("running ").and_then(|n| u32::try_from(n).ok()) {
            Health::Running(pid)
        } else if let Some(code) = num("exited ").and_then(|n| i32::try_from(n).ok()) {
            Health::Exited(code)
        } else if out == "stopping" {
            Health::Stopping
        } else {
            Health::Gone
        },
    )
}

/// Start the server detached (umask 022: the files its tools create are
/// readable as on any login), wait (up to 15 s) for its socket, and return
/// its process record.
pub fn start(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<ServerProcess, RemoteError> {
    let serve = format!(
        "echo $$ > {wpid}; umask 022; {bin} serve --listen {sock} --cwd {cwd} --idle-timeout {idle}s --secret-file {secret} --log {log} & echo $! > {pid}; wait $!; echo $? > {exit}",
        wpid = sh(&format!("{}/wpid", s.state_dir)),
        bin = sh(&s.bin),
        sock = sh(&s.socket),
        cwd = sh(&s.cwd),
        idle = s.idle_timeout_secs,
        secret = sh(&format!("{}/secret", s.state_dir)),
        log = sh(&format!("{}/server.log", s.state_dir)),
        pid = sh(&format!("{}/pid", s.state_dir)),
        exit = sh(&format!("{}/exit", s.state_dir)),
    );
    let script = format!(
        r#"{head}{IDENT}cd {cwd} || {{ echo "remote --cwd {cwdt}: no such directory" >&2; exit 1; }}
[ -f "$st/secret" ] || {{ echo "no secret in $st" >&2; exit 1; }}
unset OLLIE_TOOLS_PATH TOOLSRV_SOCKET TOOLSRV_SECRET NAMESPACE
OLLIE_CFG_PATH="$cfg"; export OLLIE_CFG_PATH
rm -f "$st/exit" "$st/pid" "$st/wpid" "$sock"
inner={inner}
if command -v setsid >/dev/null 2>&1; then det=setsid; else det=nohup; fi
$det sh -c "$inner" </dev/null >>"$st/wrapper.log" 2>&1 &
i=0
while [ $i -lt 150 ]; do
  if [ -S "$sock" ] && [ -f "$st/pid" ]; then
    p=$(cat "$st/pid")
    if id=$(ident "$p"); then echo "started $p $id"; exit 0; fi
  fi
  if [ -f "$st/exit" ]; then
    echo "the remote server exited with status $(cat "$st/exit"):" >&2
    tail -n 5 "$st/server.log" >&2
    exit 1
  fi
  sleep 0.1
  i=$((i+1))
done
echo "the remote server did not create $sock within 15 s" >&2
tail -n 5 "$st/server.log" >&2
exit 1
"#,
        head = head(prelude, s),
        cwd = sh(&s.cwd),
        cwdt = s.cwd.replace(['"', '$', '`', '\\'], "?"),
        inner = sh(&serve),
    );
    parse_started(&ssh.run(&script, Input::None)?)
}

/// Stop the server (SIGTERM; SIGKILL after 8 s), without removing its files;
/// what was refused, one sentence each. Only the recorded process is
/// signalled, and only while it is the one recorded (same start time and
/// executable); a pid file that names another process is reported, never
/// used.
pub fn kill(
    ssh: &Ssh,
    prelude: &str,
    s: &RemoteServer,
    process: Option<&ServerProcess>,
) -> Result<Vec<String>, RemoteError> {
    let script = format!(
        r#"{head}{IDENT}{record}fp=$(cat "$st/pid" 2>/dev/null)
if [ -z "$want_pid" ]; then
  if [ -n "$fp" ]; then echo "refused: $st/pid names process $fp, but nothing records that \`toolsrv remote up\` started it; it is not signalled (stop it yourself if it is this toolsrv server)"; fi
else
  if [ -n "$fp" ] && [ "$fp" != "$want_pid" ]; then
    echo "refused: $st/pid was rewritten (it names process $fp; the server started as process $want_pid); the process it names is not signalled"
  fi
  if [ "$(ident "$want_pid")" = "$want" ]; then
    kill -TERM "$want_pid" 2>/dev/null || true
    i=0
    while [ "$(ident "$want_pid")" = "$want" ] && [ $i -lt 80 ]; do sleep 0.1; i=$((i+1)); done
    if [ "$(ident "$want_pid")" = "$want" ]; then kill -KILL "$want_pid" 2>/dev/null || true; fi
  fi
fi
wp=$(cat "$st/wpid" 2>/dev/null)
i=0
while [ ! -f "$st/exit" ] && ident "$wp" >/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
"#,
        head = head(prelude, s),
        record = record_vars(process),
    );
    let out = ssh.run(&script, Input::None)?;
    Ok(out
        .lines()
        .filter_map(|l| l.strip_prefix("refused: "))
        .map(|l| format!("on {}: {l}", ssh.address()))
        .collect())
}

/// Stop the server and remove everything `up` made for it: its socket, its
/// state directory (secret, configuration, logs), and the runtime directory
/// when it is left empty. Installed binaries and sent objects stay (the next
/// `up` reuses them). What [`kill`] refused.
pub fn remove(
    ssh: &Ssh,
    prelude: &str,
    s: &RemoteServer,
    process: Option<&ServerProcess>,
) -> Result<Vec<String>, RemoteError> {
    let refused = kill(ssh, prelude, s, process)?;
    let mut script = format!(
        "{}rm -rf \"$st\" \"$cfg\"\nrm -f \"$sock\"\n",
        head(prelude, s)
    );
    if let Some(rt) = &s.runtime_dir {
        script.push_str(&format!("rmdir {} 2>/dev/null || true\n", sh(rt)));
    }
    ssh.run(&script, Input::None)?;
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_records_are_parsed_strictly() {
        let p = parse_started("noise\nstarted 4242 98765 /home/a b/toolsrv\n").expect("parse");
        assert_eq!(
            p,
            ServerProcess {
                pid: 4242,
                start_time: 98765,
                exe: "/home/a b/toolsrv".into()
            }
        );
        for bad in [
            "",
            "started 1 5 /x",
            "started -1 5 /x",
            "started 9 x /x",
            "started 9 5",
        ] {
            assert!(parse_started(bad).is_err(), "{bad:?}");
        }
    }

    /// The `ident` function, run by a real `sh` against this process and
    /// against pids it must refuse.
    #[test]
    fn ident_names_live_processes_only() {
        let run = |pid: &str| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{IDENT}ident {}", sh(pid)))
                .output()
                .expect("sh")
        };
        let me = std::process::id().to_string();
        let out = run(&me);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let (start, exe) = text.trim().split_once(' ').expect("two fields");
        assert!(start.parse::<u64>().is_ok(), "{text}");
        let mine = std::fs::read_link("/proc/self/exe").expect("exe");
        assert_eq!(exe, mine.to_string_lossy());
        for bad in ["-1", "0", "1", "", "12x", "999999999"] {
            assert!(!run(bad).status.success(), "{bad:?}");
        }
    }
}
