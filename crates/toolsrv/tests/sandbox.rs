//! Sandbox acceptance over the socket (issue 5): the shared harness.
//!
//! Every case is a real tool run through `proc/new` on a real `toolsrv serve`.
//! A [`Fixture`] owns two temp directories: the server's `--cwd` (its socket and
//! log live in a third, [`crate::util::Server::run`]) and an "outside" one that is not under the cwd and holds the tools
//! directory, the policy file and its profiles, the `ro`/`rox`/`rw` rule
//! directories and a secret that no rule grants.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::util::{Launch, Raw, Server};

/// What a blocked filesystem operation must print (EACCES).
pub const EACCES: &str = "Permission denied";
/// What the filesystem view makes a write outside every writable rule print
/// (EROFS: the mount is read-only, before Landlock is asked).
pub const EROFS: &str = "Read-only file system";

/// Whether `text` shows a refusal by the sandbox: Landlock's EACCES; the
/// filesystem view's EROFS (a read-only mount) or EBUSY (a protected path or
/// a pinned directory is a mount point: it cannot be removed or renamed); or
/// the view's ENOENT for a path no rule names (it does not exist there), as
/// the C library and `sh` print it.
pub fn refused(text: &str) -> bool {
    [
        EACCES,
        EROFS,
        "Device or resource busy",
        "No such file or directory",
        "Directory nonexistent",
    ]
    .iter()
    .any(|e| text.contains(e))
}
/// What a blocked signal or scoped socket operation must print (EPERM).
pub const EPERM: &str = "Operation not permitted";
/// The secret's content; no output of a sandboxed tool may contain it.
pub const SECRET: &str = "s3cret-content-8d1f";

/// The test-specific policy: the default policy's rules plus the fixture's
/// `ro`/`rox`/`rw` directories. Written as JSON, which is YAML.
#[derive(Clone, Debug)]
pub struct Policy {
    /// `general.best_effort`.
    pub best_effort: bool,
    /// `filesystem.ro`.
    pub ro: Vec<String>,
    /// `filesystem.rox`.
    pub rox: Vec<String>,
    /// `filesystem.rw`.
    pub rw: Vec<String>,
    /// `filesystem.rwx`.
    pub rwx: Vec<String>,
    /// `network.enabled`.
    pub net: bool,
    /// `network.bind_tcp`.
    pub bind_tcp: Vec<u16>,
    /// `network.connect_tcp`.
    pub connect_tcp: Vec<u16>,
    /// `network.domains`.
    pub domains: Vec<String>,
    /// `network.hosts`: name and address.
    pub hosts: Vec<(String, String)>,
    /// `secrets`, as written.
    pub secrets: Vec<serde_json::Value>,
    /// `env`.
    pub env: Vec<String>,
    /// `validation.deny`.
    pub deny: Vec<String>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Policy {
    /// The default policy's rules (crates/sandbox/default-sandbox.yaml) plus
    /// `<outside>/ro`, `<outside>/rox` and `<outside>/rw`.
    pub fn new(outside: &Path) -> Policy {
        let p = |name: &str| outside.join(name).display().to_string();
        let mut ro = strings(&["/etc", "/dev/urandom", "/dev/random"]);
        ro.push(p("ro"));
        let mut rox = strings(&["/usr", "/bin", "/sbin", "/lib", "/lib64"]);
        rox.push(p("rox"));
        let mut rw = strings(&["/dev/null", "/dev/zero", "/dev/full"]);
        rw.push(p("rw"));
        Policy {
            best_effort: true,
            ro,
            rox,
            rw,
            rwx: strings(&["{CWD}", "{TOOLSRV_TMPDIR}"]),
            net: true,
            bind_tcp: Vec::new(),
            connect_tcp: Vec::new(),
            domains: Vec::new(),
            hosts: Vec::new(),
            secrets: Vec::new(),
            env: strings(&[
                "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ",
                "TMPDIR",
            ]),
            deny: Vec::new(),
        }
    }

    /// The policy file's text.
    pub fn text(&self) -> String {
        let v = json!({
            "general": {"best_effort": self.best_effort},
            "filesystem": {"ro": self.ro, "rox": self.rox, "rw": self.rw, "rwx": self.rwx},
            "network": {
                "enabled": self.net,
                "bind_tcp": self.bind_tcp,
                "connect_tcp": self.connect_tcp,
                "domains": self.domains,
                "hosts": self.hosts.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, serde_json::Value>>(),
            },
            "env": self.env,
            "secrets": self.secrets,
            "advanced": {"ldd": false, "add_exec": true},
            "validation": {"deny": self.deny},
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }
}

/// One tool run's result.
#[derive(Debug, Clone)]
pub struct Out {
    /// `isError`.
    pub is_error: bool,
    /// The text of the first content item.
    pub text: String,
}

impl Out {
    /// Assert the run failed and the tool itself saw `errno_text` (not merely a failure).
    #[track_caller]
    /// For `EACCES`, the view's `EROFS` counts too (a write outside every
    /// writable rule meets the read-only mount before Landlock).
    pub fn denied(&self, errno_text: &str) {
        let seen = if errno_text == EACCES {
            refused(&self.text)
        } else {
            self.text.contains(errno_text)
        };
        assert!(
            self.is_error && seen,
            "expected a failure with {errno_text:?}, got {self:?}"
        );
        assert!(
            !self.text.contains(SECRET),
            "the secret leaked into the output: {self:?}"
        );
    }

    /// Assert the tool could not read what it asked for: refused (Landlock's
    /// EACCES where there is no view), or shown empty (the view's mask: a
    /// hidden path reads as an empty file).
    #[track_caller]
    pub fn hidden(&self) {
        let masked = !self.is_error && self.text.trim().is_empty();
        assert!(
            masked || (self.is_error && refused(&self.text)),
            "expected a refusal or an empty read, got {self:?}"
        );
        assert!(
            !self.text.contains(SECRET),
            "the secret leaked into the output: {self:?}"
        );
    }

    /// Assert the run succeeded; returns the text.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert!(!self.is_error, "expected success, got {self:?}");
        &self.text
    }
}

/// Which policy the server runs with.
#[derive(Clone, Debug)]
// Made once per test server: the size of the policy does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Mode {
    /// No `--sandbox` flag and no config file: the embedded default policy.
    EmbeddedDefault,
    /// `--sandbox <outside>/policy/sandbox.yaml` holding this policy.
    File(Policy),
}

/// A server plus the directories of one test.
pub struct Fixture {
    /// The running server; its `dir` is the tools' working directory.
    pub srv: Server,
    /// Outside the cwd: tools, policy, rule directories, secret.
    pub outside: tempfile::TempDir,
    /// A connection attached as fid 0 (`--no-auth` servers only).
    pub c: Option<Raw>,
    /// The token to put in payloads (auth servers).
    pub token: Option<String>,
}

/// Build the outside directory: tools, rule dirs and files, the secret.
pub fn outside_dir() -> tempfile::TempDir {
    let outside = tempfile::tempdir().expect("tempdir");
    let o = outside.path();
    for d in ["tools", "policy/sandbox", "ro", "rox", "rw", "secret"] {
        std::fs::create_dir_all(o.join(d)).expect("mkdir");
    }
    let tool = |name: &str, shell: &str| {
        std::fs::write(
            o.join("tools").join(format!("{name}.yaml")),
            format!(
                "description: Run a script with {shell}\nparams:\n  script: {{type: string, description: The script, required: true}}\ncommand: \"{shell} -c {{script}}\"\n"
            ),
        )
        .expect("write tool");
    };
    tool("sh", "sh");
    tool("bash", "bash");
    std::fs::write(o.join("secret/secret.txt"), SECRET).expect("secret");
    std::fs::write(o.join("ro/readme.txt"), "readable\n").expect("ro file");
    std::fs::write(o.join("rw/file.txt"), "movable\n").expect("rw file");
    std::fs::create_dir(o.join("rw/sub")).expect("rw/sub");
    outside
}

impl Fixture {
    /// A `--no-auth` server with the `sh`/`bash` tools loaded for agent `a1`.
    pub fn new(mode: Mode, extra: &[&str]) -> Fixture {
        Fixture::with_env(mode, extra, &[], None)
    }

    /// A server with extra environment variables; with `secret`, auth is on and
    /// the fixture authenticates with it.
    pub fn with_env(
        mode: Mode,
        extra: &[&str],
        env: &[(&str, &str)],
        secret: Option<&str>,
    ) -> Fixture {
        let outside = outside_dir();
        Fixture::start(outside, mode, extra, env, secret)
    }

    /// Start a server over an existing outside directory.
    pub fn start(
        outside: tempfile::TempDir,
        mode: Mode,
        extra: &[&str],
        env: &[(&str, &str)],
        secret: Option<&str>,
    ) -> Fixture {
        let tools = outside.path().join("tools").display().to_string();
        let mut args: Vec<String> = vec!["--tools".into(), tools];
        if let Mode::File(p) = &mode {
            let file = outside.path().join("policy/sandbox.yaml");
            std::fs::write(&file, p.text()).expect("write policy");
            args.push("--sandbox".into());
            args.push(file.display().to_string());
        }
        if secret.is_none() {
            args.push("--no-auth".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let srv = start_server(&args, env);
        if matches!(mode, Mode::EmbeddedDefault) {
            assert!(
                srv.log_text().contains("using the built-in default policy"),
                "not on the embedded policy:\n{}",
                srv.log_text()
            );
        }
        let mut f = Fixture {
            srv,
            outside,
            c: None,
            token: None,
        };
        let mut c = match secret {
            Some(s) => {
                let (c, token) = f.srv.authed(s);
                f.token = Some(token);
                c
            }
            None => f.srv.attached(),
        };
        c.write("ctl", "load a1 sh\nload a1 bash")
            .expect("load the tools");
        f.c = Some(c);
        f
    }

    /// The connection.
    pub fn conn(&mut self) -> &mut Raw {
        self.c.as_mut().expect("fixture connection")
    }

    /// The tools' working directory (the server's `--cwd`).
    pub fn cwd(&self) -> &Path {
        self.srv.cwd()
    }

    /// A path in the outside directory.
    pub fn out(&self, rel: &str) -> PathBuf {
        self.outside.path().join(rel)
    }

    /// The policy file.
    pub fn policy_file(&self) -> PathBuf {
        self.out("policy/sandbox.yaml")
    }

    /// Run `script` with the `sh` tool for agent `a1`.
    pub fn sh(&mut self, script: &str) -> Out {
        self.call("a1", "sh", script, &[])
    }

    /// Run `script` with the `bash` tool for agent `a1`.
    pub fn bash(&mut self, script: &str) -> Out {
        self.call("a1", "bash", script, &[])
    }

    /// Run `script` with `tool` for `agent` with extra payload fields.
    pub fn call(&mut self, agent: &str, tool: &str, script: &str, extra: &[(&str, &str)]) -> Out {
        let token = self.token.clone();
        let mut fields: Vec<(&str, &str)> = vec![("tool", tool), ("agent", agent)];
        if let Some(t) = token.as_deref() {
            fields.push(("token", t));
        }
        fields.push(("script", script));
        fields.extend_from_slice(extra);
        let payload = toolsrv_protocol::encode_payload(&fields);
        let reply = self
            .conn()
            .ask("proc/new", &payload)
            .expect("proc/new answers with a result");
        parse_result(&reply)
    }

    /// Load `tool` for `agent`.
    pub fn load(&mut self, agent: &str, tool: &str) {
        self.conn()
            .write("ctl", &format!("load {agent} {tool}"))
            .expect("load");
    }

    /// Copy the netprobe helper into the cwd (rwx in every policy here); returns
    /// the command word to use in scripts.
    pub fn install_netprobe(&self) -> String {
        let dst = self.cwd().join("netprobe");
        std::fs::copy(netprobe(), &dst).expect("copy netprobe");
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        dst.display().to_string()
    }

    /// Copy the webprobe helper into the cwd as `./webprobe`; returns the
    /// command word.
    pub fn install_webprobe(&self) -> String {
        let dst = self.cwd().join("webprobe");
        std::fs::copy(webprobe(), &dst).expect("copy webprobe");
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        "./webprobe".to_string()
    }

    /// Whether the server process is still running.
    pub fn server_alive(&mut self) -> bool {
        match self.srv.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

/// Parse a ToolResult JSON.
pub fn parse_result(reply: &str) -> Out {
    let v: Value = serde_json::from_str(reply).expect("ToolResult JSON");
    Out {
        is_error: v["isError"].as_bool().expect("isError"),
        text: v["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// Start `toolsrv serve` like [`Server::start`] but with extra environment
/// variables (which the util helper cannot set).
pub fn start_server(extra: &[String], env: &[(&str, &str)]) -> Server {
    Launch::new().args(extra).envs(env.iter().copied()).start()
}

/// The netprobe example binary (crates/toolsrv/examples/netprobe.rs), which
/// `cargo test` builds with the tests.
pub fn netprobe() -> &'static Path {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE.get_or_init(|| crate::util::example("netprobe"))
}

/// The `webprobe` example (requests through a run's network), built once.
pub fn webprobe() -> &'static Path {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE.get_or_init(|| crate::util::example("webprobe"))
}
