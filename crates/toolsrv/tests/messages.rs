//! Messages a new user meets, each saying what happened and what to do:
//! a hidden file read with `file_read`, a shell's refusal on a protected
//! path, a bad or empty `--agent`, a wrong `$TOOLSRV_SECRET` or generated secret, an argument
//! that is not UTF-8.

use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output, Stdio};

use crate::util::{toolsrv_bin, Launch, Server};

/// The CLI against `srv` with `args` (`TOOLSRV_SECRET` unset unless
/// `secret`), run in the server's cwd.
fn cli(srv: &Server, args: &[&std::ffi::OsStr], secret: Option<&str>) -> Output {
    let mut c = Command::new(toolsrv_bin());
    c.args(args)
        .current_dir(srv.cwd())
        .env("TOOLSRV_SOCKET", &srv.socket)
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::null());
    if let Some(s) = secret {
        c.env("TOOLSRV_SECRET", s);
    }
    c.output().expect("run the CLI")
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

fn run(srv: &Server, args: &[&str]) -> (i32, String, String) {
    let a = os(args);
    let refs: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
    let o = cli(srv, &refs, None);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn file_read_of_a_hidden_file_says_it_is_hidden_not_empty() {
    let srv = Server::start(&[]);
    std::fs::write(srv.cwd().join("empty.txt"), "").expect("empty file");
    let (code, out, err) = run(&srv, &["call", "file_read", "path=/etc/shadow"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.starts_with("file_read: cannot read /etc/shadow: hidden by the sandbox"),
        "{out}{err}"
    );
    // A file that is empty is still said to be empty.
    let (code, out, _) = run(&srv, &["call", "file_read", "path=empty.txt"]);
    assert_eq!((code, out.as_str()), (0, "(the file is empty)\n"));
}

/// `.git/hooks` of the workspace's repository is read-only to tools: the
/// shell's `Read-only file system` (in the filesystem view) is followed by a
/// line naming it and why. (The Landlock-only fallback says `Permission
/// denied` and gets the same line, from the carved paths; this host has a
/// view.)
#[test]
fn a_shell_refused_on_a_protected_path_gets_a_line_naming_it() {
    let view = "on";
    let ws = tempfile::tempdir().expect("workspace");
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .status();
    if !git.is_ok_and(|s| s.success()) {
        toolsrv_testkit::skip::missing_prerequisite("git (for a repository's .git/hooks)");
        return;
    }
    let srv = Launch::new().cwd_dir(ws).env("TOOLSRV_VIEW", view).start();
    let hooks = std::fs::canonicalize(srv.cwd().join(".git/hooks")).expect("hooks");
    let (code, out, err) = run(
        &srv,
        &[
            "call",
            "shell",
            "command=touch .git/hooks/pre-commit; echo done",
        ],
    );
    assert_eq!(code, 0, "{view}: {out}{err}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("[toolsrv: {}/pre-commit: it lies in {}, which is ", hooks.display(), hooks.display()))
            && last.contains("a path the sandbox protects whatever the rules grant; name it in a rule of the policy to hand it to tools"),
        "{view}: {out}"
    );
    // A refusal elsewhere gets no such line.
    let (_, out, _) = run(&srv, &["call", "shell", "command=touch /etc/toolsrv-x"]);
    assert!(!out.contains("[toolsrv:"), "{view}: {out}");
}

#[test]
fn a_bad_or_empty_agent_id_says_what_an_agent_id_is() {
    let srv = Server::start(&["--no-auth"]);
    let (code, _, err) = run(&srv, &["call", "--agent", "a b", "shell", "command=true"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("invalid value 'a b' for '--agent <AGENT>'"),
        "{err}"
    );
    assert!(
        err.contains("an agent ID is 1 to 128 characters, each a letter (A-Z, a-z), a digit or one of . _ : @ -"),
        "{err}"
    );
    let (code, _, err) = run(&srv, &["call", "--agent", "", "shell", "command=true"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the agent ID is empty: an agent ID is 1 to 128"),
        "{err}"
    );
    assert!(!err.contains("write an agent ID first"), "{err}");
    let (code, _, err) = run(&srv, &["tools", ""]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the agent ID is empty"), "{err}");
    // The server says it too, to any client.
    let mut c = srv.attached();
    let e = c.write("ctl", "load a/b shell").expect_err("refused");
    assert!(
        e.starts_with("invalid agent ID: an agent ID is 1 to 128 characters"),
        "{e}"
    );
}

#[test]
fn a_wrong_toolsrv_secret_says_where_the_secret_came_from() {
    let srv = Server::start(&[]);
    // The first client's secret is the server's.
    let (code, _, err) = run(&srv, &["info"]);
    assert_eq!(code, 0, "{err}");
    let args = os(&["info"]);
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
    let o = cli(&srv, &refs, Some("not-the-servers-secret"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "authentication failed: the server at {} has another secret than the one in $TOOLSRV_SECRET (set in this environment, it overrides --secret-file and {}): unset $TOOLSRV_SECRET",
            srv.socket.display(),
            toolsrv_client::secret::secret_file_path(&srv.socket).display()
        )),
        "{err}"
    );
}

#[test]
fn a_wrong_generated_secret_names_its_file_in_the_per_user_directory() {
    let srv = Server::start(&[]);
    // The server keeps the first client's secret; a client with another
    // per-user directory generates another one there.
    let (code, _, err) = run(&srv, &["info"]);
    assert_eq!(code, 0, "{err}");
    let elsewhere = tempfile::tempdir().expect("runtime dir");
    let o = Command::new(toolsrv_bin())
        .arg("info")
        .env("TOOLSRV_SOCKET", &srv.socket)
        .env("XDG_RUNTIME_DIR", elsewhere.path())
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::null())
        .output()
        .expect("run the CLI");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let file = toolsrv_client::secret::secret_file_path(&srv.socket);
    let theirs = elsewhere.path().join("toolsrv/secrets").join(
        file.file_name()
            .expect("the per-user file of the socket is named by its key"),
    );
    assert!(theirs.exists(), "{}: {err}", theirs.display());
    assert!(
        err.contains(&format!(
            "authentication failed: the server at {} has another secret than the one in {} (it keeps the first secret a client sends",
            srv.socket.display(),
            theirs.display()
        )) && err.contains("another $XDG_RUNTIME_DIR or $HOME"),
        "{err}"
    );
    assert!(!err.contains(".sock.secret"), "{err}");
}

#[test]
fn an_argument_that_is_not_utf8_is_named() {
    let srv = Server::start(&["--no-auth"]);
    let bad = std::ffi::OsStr::from_bytes(b"path=caf\xe9");
    let o = cli(
        &srv,
        &[
            "call".as_ref(),
            "file_read".as_ref(),
            "limit=1".as_ref(),
            bad,
        ],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tool argument 2 (path=caf\u{fffd}) is not valid UTF-8"),
        "{err}"
    );
    let o = cli(
        &srv,
        &[
            "call".as_ref(),
            "--cwd".as_ref(),
            std::ffi::OsStr::from_bytes(b"d\xff"),
            "shell".as_ref(),
        ],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("argument 3 (d\u{fffd}, the value of --cwd) is not valid UTF-8"),
        "{err}"
    );
}

#[test]
fn cat_of_a_json_file_ends_with_a_newline() {
    let srv = Server::start(&["--no-auth"]);
    let (code, out, err) = run(&srv, &["cat", "info"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("{\"") && out.ends_with("}\n"), "{out:?}");
}
