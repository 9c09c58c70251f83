//! Issue 25: everyday agent work succeeds under the built-in policy, and
//! credentials stay hidden.
//!
//! Each test starts a real server on the built-in policy with `--cwd` a
//! fresh project and `HOME` a fresh home holding a real `~/.gitconfig` and two
//! decoy credential stores (`~/.ssh/id_x`, `~/.aws/credentials`), and drives it
//! through the CLI (`toolsrv call`) from the project's root or a
//! subdirectory, as a user's agent would. The toolchains are the machine's:
//! the server gets `CARGO_HOME`, `RUSTUP_HOME` and `PYENV_ROOT` pointing at
//! them. Every step is bounded in time; nothing touches the network (cargo
//! `--offline`, pip `--no-index`, npm `--offline`).
//!
//! A toolchain that is not installed is a skip said on stderr; under `CI`
//! (`.ci/run` installs them) it is a failure, so a skip never reads as a pass
//! there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{toolsrv_bin, Launch, Server};

/// The decoy private key's content: must never appear in any output.
const SSH_DECOY: &str = "DECOY-PRIVATE-KEY-3f9a";
/// The decoy cloud credential's content.
const AWS_DECOY: &str = "DECOY-AWS-SECRET-77c1";

/// A project (the server's `--cwd`), a home, a directory outside both, and
/// the server.
struct Project {
    _root: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    srv: Server,
}

/// One CLI run.
#[derive(Debug)]
struct Run {
    /// Exit code of `toolsrv call` (124 when the bound ran out).
    code: Option<i32>,
    out: String,
    err: String,
}

impl Run {
    /// Asserts success and returns stdout.
    #[track_caller]
    fn ok(&self, step: &str) -> &str {
        assert_eq!(self.code, Some(0), "{step} failed: {self:#?}");
        &self.out
    }

    /// Asserts failure (not a timeout) and returns stdout + stderr.
    #[track_caller]
    fn failed(&self, step: &str) -> String {
        assert!(
            !matches!(self.code, Some(0) | Some(124)),
            "{step} should fail: {self:#?}"
        );
        format!("{}{}", self.out, self.err)
    }
}

/// The real user's home (the test's own `$HOME`), where the toolchains are.
fn real_home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

/// `$var` from the test's environment, else `default` under the real home,
/// when that directory exists.
fn toolchain_dir(var: &str, default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .or_else(|| Some(real_home().join(default)))
        .filter(|p| p.is_dir())
}

/// Whether `program` is on `PATH`. When it is not: under `CI` a failure
/// (`.ci/run` installs it), elsewhere a `SKIP:` line on stderr.
fn present(program: &str, step: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()));
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is not installed, so {step} cannot run (.ci/run installs it)"
        );
        eprintln!("SKIP: {step}: {program} is not installed");
    }
    found
}

impl Project {
    fn start() -> Project {
        Project::start_with(&[])
    }

    /// [`Project::start`] with `env` added to the server's environment.
    fn start_with(env: &[(&str, &str)]) -> Project {
        let root = tempfile::tempdir().expect("tempdir");
        let r = std::fs::canonicalize(root.path()).expect("canonicalize");
        let (home, ws, outside) = (r.join("home"), r.join("project"), r.join("outside"));
        // A developer's home: besides the credentials, npm's and pip's caches
        // exist (their rules apply to existing directories).
        for d in [
            &home,
            &ws.join("src"),
            &outside,
            &home.join(".ssh"),
            &home.join(".aws"),
            &home.join(".npm"),
            &home.join(".cache/pip"),
        ] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Everyday Tester\n\temail = tester@example.com\n[init]\n\tdefaultBranch = main\n",
        )
        .expect("gitconfig");
        std::fs::write(home.join(".ssh/id_x"), SSH_DECOY).expect("ssh decoy");
        std::fs::write(
            home.join(".aws/credentials"),
            format!("[default]\naws_secret_access_key = {AWS_DECOY}\n"),
        )
        .expect("aws decoy");
        std::fs::write(ws.join("README"), "everyday project\n").expect("README");
        // A project is a git repository before the agent arrives.
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .env("HOME", &home)
            .status();
        assert!(git.is_ok_and(|s| s.success()), "git init");

        let mut launch = Launch::new()
            .cwd(&ws)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("PIP_FIND_LINKS");
        for (var, default) in [
            ("CARGO_HOME", ".cargo"),
            ("RUSTUP_HOME", ".rustup"),
            ("PYENV_ROOT", ".pyenv"),
        ] {
            if let Some(dir) = toolchain_dir(var, default) {
                launch = launch.env(var, dir);
            }
        }
        let srv = launch.envs(env.iter().copied()).start();
        Project {
            _root: root,
            home,
            ws,
            outside,
            srv,
        }
    }

    /// `toolsrv call --agent everyday <tool> <args>` run in `dir` (the CLI
    /// sends it as the request's directory), bounded by `limit`.
    fn call(&self, dir: &Path, tool: &str, args: &[&str], limit: Duration) -> Run {
        let secs = limit.as_secs().max(1).to_string();
        let out = Command::new("timeout")
            .args(["--kill-after=5", &secs])
            .arg(toolsrv_bin())
            .arg("--socket")
            .arg(&self.srv.socket)
            .args(["call", "--agent", "everyday", "--timeout"])
            .arg(format!("{secs}s"))
            .arg(tool)
            .args(args)
            .current_dir(dir)
            .env_remove("TOOLSRV_SECRET")
            .env_remove("TOOLSRV_SOCKET")
            .stdin(Stdio::null())
            .output()
            .expect("run toolsrv call under timeout(1)");
        Run {
            code: out.status.code(),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The `shell` tool running `command` in `dir`.
    fn sh(&self, dir: &Path, command: &str, limit: Duration) -> Run {
        self.call(dir, "shell", &[&format!("command={command}")], limit)
    }
}

const SHORT: Duration = Duration::from_secs(60);
const BUILD: Duration = Duration::from_secs(300);

#[test]
fn everyday_git_works_from_the_root_and_from_a_subdirectory() {
    let p = Project::start();
    let (ws, src) = (&p.ws, p.ws.join("src"));
    std::fs::write(src.join("lib.txt"), "one\n").expect("write");
    // From the root: status, add, commit (as the user of ~/.gitconfig), log.
    let st = p.sh(ws, "git status --short", SHORT);
    assert!(st.ok("git status").contains("?? README"), "{st:#?}");
    p.sh(ws, "git add README && git commit -q -m first", SHORT)
        .ok("git add + commit from the root");
    let log = p.sh(ws, "git log --format='%an <%ae> %s'", SHORT);
    assert_eq!(
        log.ok("git log"),
        "Everyday Tester <tester@example.com> first\n"
    );
    // From a subdirectory: the repository is the project's, found at its root.
    std::fs::write(ws.join("README"), "everyday project\nchanged\n").expect("write");
    let diff = p.sh(&src, "git diff --stat", SHORT);
    assert!(
        diff.ok("git diff from src/").contains("README | 1 +"),
        "{diff:#?}"
    );
    let st = p.sh(&src, "git status --short", SHORT);
    assert!(st.ok("git status from src/").contains("?? ./"), "{st:#?}");
    p.sh(
        &src,
        "git add lib.txt ../README && git commit -q -m second",
        SHORT,
    )
    .ok("git add + commit from src/");
    let log = p.sh(
        &src,
        "git log --oneline | wc -l && git show --stat HEAD",
        SHORT,
    );
    let text = log.ok("git log from src/");
    assert!(text.starts_with("2\n"), "{text}");
    assert!(text.contains("src/lib.txt"), "{text}");
}

#[test]
fn everyday_make_builds_a_c_program() {
    let p = Project::start();
    if !present("cc", "make of a C file") || !present("make", "make of a C file") {
        return;
    }
    std::fs::write(
        p.ws.join("src/hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello from C\"); return 0; }\n",
    )
    .expect("hello.c");
    std::fs::write(
        p.ws.join("Makefile"),
        "hello: src/hello.c\n\tcc -O0 -o hello src/hello.c\n",
    )
    .expect("Makefile");
    let run = p.sh(&p.ws, "make -s && ./hello", BUILD);
    assert_eq!(run.ok("make"), "hello from C\n");
    // Again from a subdirectory, against the root's Makefile.
    let run = p.sh(&p.ws.join("src"), "make -s -C .. -B && ../hello", BUILD);
    assert_eq!(run.ok("make -C .. from src/"), "hello from C\n");
}

#[test]
fn everyday_cargo_builds_a_crate_offline() {
    let p = Project::start();
    if !present("cargo", "cargo build --offline") {
        return;
    }
    let krate = p.ws.join("hello");
    std::fs::create_dir_all(krate.join("src")).expect("mkdir");
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("Cargo.toml");
    std::fs::write(
        krate.join("src/main.rs"),
        "fn main() {\n    println!(\"hello from Rust\");\n}\n",
    )
    .expect("main.rs");
    let run = p.sh(
        &krate.join("src"),
        "cargo build --offline --quiet && ../target/debug/hello",
        BUILD,
    );
    assert_eq!(run.ok("cargo build --offline"), "hello from Rust\n");
}

/// Writes a pure-Python wheel by hand (a wheel is a zip with metadata), so
/// that `pip install --no-index` needs no build backend and no network.
const MAKE_WHEEL: &str = r#"
import base64, hashlib, zipfile
name, ver = "everyday_pkg", "0.1"
files = {
    f"{name}/__init__.py": "GREETING = 'hello from the wheel'\n",
    f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n",
    f"{name}-{ver}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: everyday\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
record = f"{name}-{ver}.dist-info/RECORD"
lines = [f"{p},{digest(t.encode())},{len(t.encode())}" for p, t in files.items()] + [f"{record},,"]
with zipfile.ZipFile(f"dist/{name}-{ver}-py3-none-any.whl", "w") as z:
    for p, t in files.items():
        z.writestr(p, t)
    z.writestr(record, "\n".join(lines) + "\n")
"#;

#[test]
fn everyday_python_venv_installs_a_local_package() {
    let p = Project::start();
    if !present("python3", "a venv with pip install --no-index") {
        return;
    }
    // The tool's python3 is the user's (pyenv's shim picks the same Python
    // as outside the sandbox), not whatever else is on PATH.
    let which = "import os, sys; print(os.path.realpath(sys.executable))";
    let outside = Command::new("python3")
        .args(["-c", which])
        .current_dir(&p.ws)
        .output()
        .expect("python3 outside the sandbox");
    let inside = p.sh(&p.ws, &format!("python3 -c '{which}'"), SHORT);
    assert_eq!(
        inside.ok("python3 in the sandbox"),
        String::from_utf8_lossy(&outside.stdout),
        "the sandbox runs another python3"
    );
    std::fs::write(p.ws.join("make_wheel.py"), MAKE_WHEEL).expect("make_wheel.py");
    std::fs::create_dir(p.ws.join("dist")).expect("dist");
    // python3 as the user has it (on this machine a pyenv shim), from src/.
    let run = p.sh(
        &p.ws.join("src"),
        "cd .. && python3 make_wheel.py && python3 -m venv .venv \
         && .venv/bin/pip install --no-index --disable-pip-version-check -q dist/everyday_pkg-0.1-py3-none-any.whl \
         && .venv/bin/python -c 'import everyday_pkg; print(everyday_pkg.GREETING)'",
        BUILD,
    );
    let text = run.ok("venv + pip install --no-index");
    assert!(text.ends_with("hello from the wheel\n"), "{run:#?}");
    assert!(
        !text.contains("cache has been disabled"),
        "pip's cache: {text}"
    );
}

#[test]
fn everyday_npm_installs_a_local_package() {
    let p = Project::start();
    if !present("npm", "npm install of a local package") {
        return;
    }
    let (lib, app) = (p.ws.join("js/greeting"), p.ws.join("js/app"));
    for d in [&lib, &app] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(
        lib.join("package.json"),
        r#"{"name": "greeting", "version": "1.0.0", "main": "index.js"}"#,
    )
    .expect("package.json");
    std::fs::write(
        lib.join("index.js"),
        "module.exports = 'hello from node';\n",
    )
    .expect("index.js");
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "app", "version": "1.0.0", "private": true}"#,
    )
    .expect("package.json");
    // Packed and installed from the tarball, which goes through npm's cache.
    let npm = "npm --offline --no-audit --no-fund --no-update-notifier --loglevel=error";
    let run = p.sh(
        &app,
        &format!(
            "(cd ../greeting && {npm} pack >/dev/null) && {npm} install ../greeting/greeting-1.0.0.tgz \
             && node -e 'console.log(require(\"greeting\"))'"
        ),
        BUILD,
    );
    assert!(
        run.ok("npm install").ends_with("hello from node\n"),
        "{run:#?}"
    );
    // The cache is copy-on-write: filled in the server's layer (the tools
    // see it), not in the human's `~/.npm`.
    let cached = p.sh(&app, "test -d ~/.npm/_cacache && echo cached", BUILD);
    assert_eq!(
        cached.ok("the cache"),
        "cached\n",
        "npm's cache was not used: {run:#?}"
    );
    assert!(
        !p.home.join(".npm/_cacache").exists(),
        "the tool's npm filled the human's cache: {run:#?}"
    );
}

#[test]
fn everyday_edits_and_file_tools_reach_the_workspace_root() {
    let p = Project::start();
    let src = p.ws.join("src");
    // sed -i (a temporary file beside the target, renamed over it) and
    // create/remove at the root, from the root and from a subdirectory.
    p.sh(
        &p.ws,
        "sed -i 's/everyday/daily/' README && touch new && rm new",
        SHORT,
    )
    .ok("sed -i and create/remove at the root");
    p.sh(
        &src,
        "sed -i 's/daily/weekly/' ../README && mkdir ../d && touch ../d/f && rm -r ../d",
        SHORT,
    )
    .ok("sed -i and create/remove at the root from src/");
    assert_eq!(
        std::fs::read_to_string(p.ws.join("README")).expect("README"),
        "weekly project\n"
    );
    // The file tools, called from src/ on the root's files.
    p.call(
        &src,
        "file_write",
        &["path=../notes.txt", "content=alpha\nbeta\n"],
        SHORT,
    )
    .ok("file_write");
    p.call(
        &src,
        "file_edit",
        &["path=../notes.txt", "old=beta", "new=gamma"],
        SHORT,
    )
    .ok("file_edit");
    let read = p.call(&src, "file_read", &["path=../notes.txt"], SHORT);
    let text = read.ok("file_read");
    assert!(text.contains("alpha") && text.contains("gamma"), "{text}");
    let glob = p.call(&p.ws, "file_glob", &["pattern=*.txt"], SHORT);
    assert!(glob.ok("file_glob").contains("notes.txt"), "{glob:#?}");
    let grep = p.call(
        &p.ws,
        "file_grep",
        &["pattern=gam+a", "path=notes.txt"],
        SHORT,
    );
    assert!(grep.ok("file_grep").contains("gamma"), "{grep:#?}");
}

#[test]
fn everyday_credentials_and_the_world_outside_stay_out_of_reach() {
    let p = Project::start();
    let home = p.home.display().to_string();
    // The git configuration is readable on purpose ...
    let cfg = p.sh(&p.ws, "cat ~/.gitconfig", SHORT);
    assert!(cfg.ok("read ~/.gitconfig").contains("Everyday Tester"));
    // ... the credential stores are not, by any name.
    for cmd in [
        "cat ~/.ssh/id_x".to_string(),
        format!("cat {home}/.aws/credentials"),
        "cat $HOME/.ssh/id_x $HOME/.aws/credentials".to_string(),
        "grep -r DECOY ~/.ssh ~/.aws".to_string(),
    ] {
        let text = p.sh(&p.ws, &cmd, SHORT).failed(&cmd);
        assert!(
            !text.contains(SSH_DECOY) && !text.contains(AWS_DECOY),
            "{cmd}: {text}"
        );
    }
    let file_read = p.call(
        &p.ws,
        "file_read",
        &[&format!("path={home}/.ssh/id_x")],
        SHORT,
    );
    assert!(!file_read
        .failed("file_read ~/.ssh/id_x")
        .contains(SSH_DECOY));
    // Nothing is written outside the project: not beside it, not in the home.
    let outside = p.outside.join("planted");
    let planted = p.home.join(".bashrc");
    for target in [&outside, &planted] {
        let cmd = format!("echo planted > {}", target.display());
        p.sh(&p.ws.join("src"), &cmd, SHORT).failed(&cmd);
        assert!(!target.exists(), "{} was written", target.display());
    }
    let file_write = p.call(
        &p.ws,
        "file_write",
        &[&format!("path={}", outside.display()), "content=x"],
        SHORT,
    );
    file_write.failed("file_write outside the project");
    assert!(!outside.exists());
}

/// Issue 28 item 5: the usual network configuration (proxies, CA bundles,
/// package mirrors) reaches tools under the built-in policy; credentials in
/// toolsrv's environment never do.
#[test]
fn everyday_network_configuration_passes_through_and_credentials_do_not() {
    let ca = "/etc/ssl/certs/ca-certificates.crt";
    let passed = [
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("NO_PROXY", "localhost,127.0.0.1"),
        ("ALL_PROXY", "socks5://127.0.0.1:1080"),
        ("http_proxy", "http://127.0.0.1:3129"),
        ("https_proxy", "http://127.0.0.1:3129"),
        ("no_proxy", "localhost"),
        ("all_proxy", "socks5://127.0.0.1:1081"),
        ("SSL_CERT_FILE", ca),
        ("SSL_CERT_DIR", "/etc/ssl/certs"),
        ("NODE_EXTRA_CA_CERTS", ca),
        ("REQUESTS_CA_BUNDLE", ca),
        ("CURL_CA_BUNDLE", ca),
        ("PIP_INDEX_URL", "http://127.0.0.1:8080/simple"),
        ("PIP_EXTRA_INDEX_URL", "http://127.0.0.1:8081/simple"),
        ("PIP_TRUSTED_HOST", "127.0.0.1"),
        ("npm_config_registry", "http://127.0.0.1:4873/"),
    ];
    let withheld = [
        ("GITHUB_TOKEN", "ghp_decoy_token"),
        ("NPM_TOKEN", "npm_decoy_token"),
        ("AWS_SECRET_ACCESS_KEY", "decoy_aws_secret"),
        ("SSH_AUTH_SOCK", "/tmp/decoy-agent.sock"),
        ("PIP_PASSWORD", "decoy_pip_password"),
    ];
    let env: Vec<(&str, &str)> = passed.iter().chain(&withheld).copied().collect();
    let p = Project::start_with(&env);
    let run = p.sh(&p.ws, "env", SHORT);
    let seen = run.ok("env");
    for (name, value) in passed {
        assert!(
            seen.lines().any(|l| l == format!("{name}={value}")),
            "{name} did not reach the tool:\n{seen}"
        );
    }
    for (name, value) in withheld {
        assert!(
            !seen.contains(name) && !seen.contains(value),
            "{name} reached the tool:\n{seen}"
        );
    }
}

/// `PIP_FIND_LINKS` naming directories outside every rule (one as a path, one
/// as a `file://` URL) reaches pip, and so do the directories: read-only, as
/// a `{PIP_FIND_LINKS}` rule would grant them. A CA bundle named by
/// `SSL_CERT_FILE` likewise. A request's own `env.PIP_FIND_LINKS` grants
/// nothing.
#[test]
fn everyday_pip_finds_the_wheels_its_find_links_variable_names() {
    let outer = tempfile::tempdir().expect("tempdir");
    let outer = std::fs::canonicalize(outer.path()).expect("canonical");
    let (wheels, more, other) = (
        outer.join("wheels"),
        outer.join("more wheels"),
        outer.join("other"),
    );
    for d in [&wheels, &more, &other] {
        std::fs::create_dir(d).expect("mkdir");
    }
    std::fs::write(other.join("secret.txt"), "not for tools").expect("secret");
    let ca = outer.join("corp-ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").expect("ca");
    let find_links = format!(
        "{} file://{}",
        wheels.display(),
        more.display().to_string().replace(' ', "%20")
    );
    let ca_s = ca.display().to_string();
    let p = Project::start_with(&[("PIP_FIND_LINKS", &find_links), ("SSL_CERT_FILE", &ca_s)]);
    if !present("python3", "pip install from PIP_FIND_LINKS") {
        return;
    }
    // The wheel is made outside the sandbox, into the second directory.
    std::fs::write(p.ws.join("make_wheel.py"), MAKE_WHEEL).expect("make_wheel.py");
    std::fs::create_dir(p.ws.join("dist")).expect("dist");
    let made = Command::new("python3")
        .arg("make_wheel.py")
        .current_dir(&p.ws)
        .status()
        .expect("python3 make_wheel.py");
    assert!(made.success());
    std::fs::rename(
        p.ws.join("dist/everyday_pkg-0.1-py3-none-any.whl"),
        more.join("everyday_pkg-0.1-py3-none-any.whl"),
    )
    .expect("move the wheel");
    let run = p.sh(
        &p.ws,
        "python3 -m venv .venv && .venv/bin/pip install --no-index --disable-pip-version-check -q everyday_pkg \
         && .venv/bin/python -c 'import everyday_pkg; print(everyday_pkg.GREETING)' && head -c 27 \"$SSL_CERT_FILE\"",
        BUILD,
    );
    let text = run.ok("pip install through PIP_FIND_LINKS");
    assert!(
        text.trim_end()
            .ends_with("hello from the wheel\n-----BEGIN CERTIFICATE-----"),
        "{run:#?}"
    );
    // Read-only: nothing can be written there.
    let run = p.sh(&p.ws, &format!("touch '{}/x'", wheels.display()), SHORT);
    assert_ne!(run.code, Some(0), "{run:#?}");
    assert!(!wheels.join("x").exists());
    // An agent's own env.PIP_FIND_LINKS widens nothing.
    let run = p.call(
        &p.ws,
        "shell",
        &[
            &format!("command=cat '{}/secret.txt'", other.display()),
            &format!("env.PIP_FIND_LINKS={}", other.display()),
        ],
        SHORT,
    );
    assert!(!run.out.contains("not for tools"), "{run:#?}");
}
