//! The remote `toolsrv serve`: its private directories, the pinned secret,
//! start (detached, under a small `sh` wrapper that records the server's pid
//! and exit status), health, and stop.
//!
//! Files in the state directory (`<socket>.d/`, 0700): `secret` (0600),
//! `config/`, `pid`, `wpid` (the wrapper), `exit` (the server's exit
//! status), `server.log`, `wrapper.log`.

use crate::error::RemoteError;
use crate::quote::sh;
use crate::ssh::{Input, Ssh};
use crate::state::RemoteServer;

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
    format!("{prelude}st={}\nsock={}\n", sh(&s.state_dir), sh(&s.socket))
}

/// Create the runtime directory (for the default socket) and the state
/// directory, 0700, refusing ones another uid owns.
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

/// The server's health.
pub fn health(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<Health, RemoteError> {
    let script = format!(
        r#"{}if [ -f "$st/pid" ] && kill -0 "$(cat "$st/pid")" 2>/dev/null; then echo "running $(cat "$st/pid")"
elif [ -f "$st/exit" ]; then echo "exited $(cat "$st/exit")"
elif [ -f "$st/wpid" ] && kill -0 "$(cat "$st/wpid")" 2>/dev/null; then echo stopping
else echo gone; fi
"#,
        head(prelude, s)
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

/// Start the server detached and wait (up to 15 s) for its socket.
pub fn start(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<(), RemoteError> {
    let serve = format!(
        "echo $$ > {wpid}; {bin} serve --listen {sock} --cwd {cwd} --idle-timeout {idle}s --secret-file {secret} --log {log} & echo $! > {pid}; wait $!; echo $? > {exit}",
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
        r#"{head}cd {cwd} || {{ echo "remote --cwd {cwdt}: no such directory" >&2; exit 1; }}
[ -f "$st/secret" ] || {{ echo "no secret in $st" >&2; exit 1; }}
unset OLLIE_TOOLS_PATH TOOLSRV_SOCKET TOOLSRV_SECRET NAMESPACE
OLLIE_CFG_PATH="$st/config"; export OLLIE_CFG_PATH
rm -f "$st/exit" "$st/pid" "$st/wpid" "$sock"
inner={inner}
if command -v setsid >/dev/null 2>&1; then det=setsid; else det=nohup; fi
$det sh -c "$inner" </dev/null >>"$st/wrapper.log" 2>&1 &
i=0
while [ $i -lt 150 ]; do
  if [ -S "$sock" ] && [ -f "$st/pid" ]; then exit 0; fi
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
    ssh.run(&script, Input::None).map(drop)
}

/// Stop the server (SIGTERM; SIGKILL after 8 s), without removing its files.
pub fn kill(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<(), RemoteError> {
    let script = format!(
        r#"{}if [ -f "$st/pid" ]; then
  p=$(cat "$st/pid")
  kill -TERM "$p" 2>/dev/null || true
  i=0
  while kill -0 "$p" 2>/dev/null && [ $i -lt 80 ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL "$p" 2>/dev/null || true
fi
if [ -f "$st/wpid" ]; then
  i=0
  while [ ! -f "$st/exit" ] && kill -0 "$(cat "$st/wpid")" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
fi
"#,
        head(prelude, s)
    );
    ssh.run(&script, Input::None).map(drop)
}

/// Stop the server and remove everything `up` made for it: its socket, its
/// state directory (secret, configuration, logs), and the runtime directory
/// when it is left empty. Installed binaries and sent objects stay (the next
/// `up` reuses them).
pub fn remove(ssh: &Ssh, prelude: &str, s: &RemoteServer) -> Result<(), RemoteError> {
    kill(ssh, prelude, s)?;
    let mut script = format!("{}rm -rf \"$st\"\nrm -f \"$sock\"\n", head(prelude, s));
    if let Some(rt) = &s.runtime_dir {
        script.push_str(&format!("rmdir {} 2>/dev/null || true\n", sh(rt)));
    }
    ssh.run(&script, Input::None).map(drop)
}
