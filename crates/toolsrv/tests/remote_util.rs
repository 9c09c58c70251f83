//! A real OpenSSH server on loopback for the remote-deployment tests: a
//! generated host key and user key in a temp directory, `sshd -D -f <config>`
//! on a free port, an `ssh_config` for the client (passed to toolsrv as
//! `$TOOLSRV_SSH_CONFIG`), and a remote "home" and runtime directory of its own.

#![allow(dead_code)]

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::util::toolsrv_bin;

/// The test kit's sshd, with what the remote tests ask of it.
pub struct Sshd {
    kit: toolsrv_testkit::Sshd,
}

impl Deref for Sshd {
    type Target = toolsrv_testkit::Sshd;

    fn deref(&self) -> &toolsrv_testkit::Sshd {
        &self.kit
    }
}

impl Sshd {
    /// Start sshd, or `None` when OpenSSH is not installed: the calling test
    /// is then skipped (recorded; a failure under `CI=true`, since `.ci/run`
    /// installs it).
    pub fn start() -> Option<Sshd> {
        if !toolsrv_testkit::Sshd::available() {
            toolsrv_testkit::skip::missing_prerequisite(
                "OpenSSH (sshd and ssh; apt-get install openssh-server openssh-client)",
            );
            return None;
        }
        let kit = toolsrv_testkit::Sshd::start().expect("start sshd");
        Some(Sshd { kit })
    }

    /// The `toolsrv` under test, pointed at this sshd.
    pub fn toolsrv(&self) -> Command {
        self.kit.toolsrv(toolsrv_bin())
    }

    /// Run toolsrv with `args`; its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.toolsrv().args(args).output().expect("run toolsrv")
    }

    /// Run toolsrv with `args`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "toolsrv {args:?} failed: {}\n{}{}\nsupervisor log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.supervisor_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ssh <host> <command>` with the test's config.
    pub fn ssh(&self, command: &str) -> Output {
        Command::new("ssh")
            .arg("-F")
            .arg(self.path("ssh_config"))
            .arg("localhost")
            .arg(command)
            .stdin(Stdio::null())
            .output()
            .expect("ssh")
    }

    /// The local per-address directory of `ssh://localhost`.
    pub fn local_dir(&self) -> Option<PathBuf> {
        let base = self.path("lrun/toolsrv/remote");
        std::fs::read_dir(base)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
    }

    pub fn supervisor_log(&self) -> String {
        self.local_dir()
            .and_then(|d| std::fs::read_to_string(d.join("supervisor.log")).ok())
            .unwrap_or_default()
    }

    /// What `up` recorded (`state.json` of the local directory).
    pub fn state(&self) -> serde_json::Value {
        let dir = self.local_dir().expect("no local directory: not up");
        let text = std::fs::read_to_string(dir.join("state.json")).expect("state.json");
        serde_json::from_str(&text).expect("state.json is JSON")
    }

    /// The remote server's state directory, as `up` recorded it.
    pub fn remote_state(&self) -> PathBuf {
        PathBuf::from(
            self.state()["remote"]["state_dir"]
                .as_str()
                .expect("remote.state_dir"),
        )
    }

    /// Live processes whose command line mentions this test's directory
    /// (sshd itself excluded).
    pub fn processes(&self) -> Vec<String> {
        let marker = self.dir.path().to_string_lossy().into_owned();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&marker) && !cmd.contains("sshd") {
                out.push(format!("{pid}: {cmd}"));
            }
        }
        out
    }

    /// Sockets left anywhere under this test's directory.
    pub fn sockets(&self) -> Vec<PathBuf> {
        fn walk(p: &Path, out: &mut Vec<PathBuf>) {
            use std::os::unix::fs::FileTypeExt;
            let Ok(rd) = std::fs::read_dir(p) else { return };
            for e in rd.flatten() {
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    walk(&e.path(), out);
                } else if t.is_socket() {
                    out.push(e.path());
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Whatever a failed test left: bring the remote down (the kit's
        // sshd stops after this).
        if self.local_dir().is_some() {
            let _ = self.run(&["remote", "down", "localhost"]);
        }
    }
}
