//! Issue 16: a daemon and a CLI that behave the way their users expect.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use toolsrv_wire::{Body, Stat, OWRITE};

use crate::util::{toolsrv_bin, wait_until, Launch, Server, WAIT};

/// A daemon whose stderr reader went away (`toolsrv serve 2>&1 | head -3`)
/// keeps serving, and SIGTERM still stops it cleanly (before: the failed log
/// write panicked the task that was logging, the signal watcher included).
#[test]
fn the_daemon_obeys_sigterm_after_its_stderr_is_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("s.sock");
    let mut child = Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(&socket)
        .arg("--no-auth")
        .arg("--cwd")
        .arg(dir.path())
        .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read three lines, then close the pipe, as `head -3` does.
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    for _ in 0..3 {
        let mut line = String::new();
        err.read_line(&mut line).expect("a log line");
    }
    drop(err);
    // More log lines: connections, a tool run.
    assert!(wait_until(WAIT, || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    }));
    for _ in 0..3 {
        let out = Command::new(toolsrv_bin())
            .arg("--socket")
            .arg(&socket)
            .arg("info")
            .output()
            .expect("client");
        assert!(out.status.success(), "the server stopped serving: {out:?}");
    }
    // Safety: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut status = None;
    let exited = wait_until(WAIT, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "SIGTERM did not stop a server whose stderr is gone");
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(!socket.exists(), "the socket was left behind");
}

/// `O_TRUNC` through 9pfuse, `dd of=` or Python becomes a `Twstat` with length
/// 0 and every other field "don't touch": on a writable file that reports
/// length 0 it changes nothing, and must succeed (it was refused).
#[test]
fn truncating_a_writable_file_to_zero_succeeds_and_anything_else_is_refused() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let dont_touch = Stat::unchanged();
    let truncate = Stat {
        length: 0,
        ..dont_touch.clone()
    };
    c.walk(1, "ctl").expect("walk ctl");
    assert_eq!(
        c.ok(Body::Twstat {
            fid: 1,
            stat: truncate.clone()
        }),
        Body::Rwstat
    );
    // What the shell then does: open for writing and write the command.
    c.ok(Body::Topen {
        fid: 1,
        mode: OWRITE,
    });
    c.ok(Body::Twrite {
        fid: 1,
        offset: 0,
        data: b"load a1 shell\n".to_vec(),
    });
    c.ok(Body::Tclunk { fid: 1 });
    assert!(c.ask("tools", "a1").expect("tools").contains("shell"));
    // Another length, a read-only file, a directory: refused.
    c.walk(2, "ctl").expect("walk ctl");
    let grow = Stat {
        length: 5,
        ..dont_touch.clone()
    };
    assert_eq!(
        c.err(Body::Twstat { fid: 2, stat: grow }),
        "permission denied"
    );
    c.walk(3, "info").expect("walk info");
    assert_eq!(
        c.err(Body::Twstat {
            fid: 3,
            stat: truncate.clone()
        }),
        "permission denied"
    );
    c.walk(4, "proc").expect("walk proc");
    assert_eq!(
        c.err(Body::Twstat {
            fid: 4,
            stat: truncate
        }),
        "permission denied"
    );
}

/// Runs `toolsrv serve` with `args` (which must make it fail at startup);
/// returns (exit code, stderr).
fn serve_fails(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(dir.path().join("s.sock"))
        .args(args)
        .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path the user typed must exist: no silent fallback to the built-ins.
#[test]
fn an_explicit_tools_dir_or_policy_that_does_not_exist_is_an_error() {
    let (code, err) = serve_fails(&["--tools", "/nonexistent/toolsrv-tools"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--tools /nonexistent/toolsrv-tools: no such directory"),
        "{err}"
    );
    let (code, err) = serve_fails(&["--sandbox", "/nonexistent/sandbox.yaml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--sandbox /nonexistent/sandbox.yaml: no such file"),
        "{err}"
    );
    // Said once, not as a log line and again as `toolsrv:`.
    assert_eq!(err.matches("no such file").count(), 1, "{err}");
}

/// The CLI against `socket`: (exit code, stdout, stderr).
fn cli(socket: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    cli_in(None, socket, args)
}

/// [`cli`] run in directory `dir` (default: the test's own).
fn cli_in(
    dir: Option<&std::path::Path>,
    socket: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = crate::util::cli(socket);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.args(args).output().expect("run the client");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Errors say what happened once, name what they are about, and suggest what
/// to do; the client writes no secret file for a server that is not there or
/// takes no secret.
#[test]
fn client_errors_are_short_and_name_their_subject() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nobody.sock");
    let (code, _, err) = cli(&missing, &["info"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "said more than once: {err}"
    );
    assert!(err.contains("is the server running?"), "{err}");
    let generated = |s: &std::path::Path| {
        toolsrv_client::secret::generated_secret_path(s).is_some_and(|p| p.exists())
    };
    assert!(
        !dir.path().join("nobody.sock.secret").exists() && !generated(&missing),
        "a secret was written for a server that is not there"
    );

    let srv = Server::start(&["--no-auth"]);
    let (code, out, err) = cli(&srv.socket, &["info"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("platform"), "{out}");
    let mut secret = srv.socket.as_os_str().to_owned();
    secret.push(".secret");
    assert!(
        !std::path::Path::new(&secret).exists() && !generated(&srv.socket),
        "a secret was written for a --no-auth server"
    );
    for (args, want) in [
        (&["stat", "9999"][..], "no process 9999"),
        (&["kill", "9999"][..], "no process 9999"),
        (&["cat", "nope"][..], "no such file in the namespace: nope"),
        (&["cat", "proc"][..], "proc is a directory"),
    ] {
        let (code, _, err) = cli(&srv.socket, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("usage:"), "{args:?}: {err}");
    }
    // A bad agent ID is a usage error, naming the value and what an ID is.
    let (code, _, err) = cli(&srv.socket, &["load", "bad agent", "shell"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("invalid value 'bad agent' for '<AGENT>': invalid agent ID: an agent ID is 1 to 128 characters"),
        "{err}"
    );
    let (code, out, err) = cli(&srv.socket, &["ls", "info"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim_end().ends_with(" info"), "{out}");
}

/// `call` runs in the caller's directory when it lies under the server's
/// `--cwd`, and otherwise in the server's `--cwd`, saying so on stderr only
/// (docs/cli.md, "The client").
#[test]
fn call_runs_where_the_caller_is_when_the_server_accepts_it() {
    let srv = Server::start(&["--no-auth"]);
    let root = std::fs::canonicalize(srv.cwd()).expect("canonical cwd");
    let sub = root.join("sub");
    std::fs::create_dir(&sub).expect("sub");
    let run_in = |dir: &std::path::Path, args: &[&str]| cli_in(Some(dir), &srv.socket, args);
    let (code, out, err) = run_in(&sub, &["call", "shell", "command=pwd"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), sub.display().to_string(), "{err}");
    assert!(err.is_empty(), "{err}");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = run_in(elsewhere.path(), &["call", "shell", "command=pwd"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), root.display().to_string(), "{err}");
    assert!(err.contains("outside the server's --cwd"), "{err}");
    let (code, out, err) = run_in(elsewhere.path(), &["bg", "shell", "command=true"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim().parse::<u64>().is_ok(), "{out}");
    assert!(err.contains("outside the server's --cwd"), "{err}");
}

/// A tool whose metadata file changed since it was loaded is loaded again at
/// its next call (the revision moves); one that no longer loads is refused
/// with the reason and the command that loads it.
#[test]
fn a_changed_tool_file_is_reloaded_at_the_next_call() {
    let (srv, mut c) = crate::procs_util::tools_session(
        &[("greet.yaml", "description: v1\ncommand: \"echo one\"\n")],
        &[],
    );
    let r = crate::procs_util::call(&mut c, &[("tool", "greet"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "one");
    let rev = c.ask("tools_rev", "a1").expect("rev");
    let file = srv.tools_dir().join("greet.yaml");
    std::fs::write(&file, "description: v2\ncommand: \"echo two\"\n").expect("edit");
    let r = crate::procs_util::call(&mut c, &[("tool", "greet"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "two");
    assert_ne!(
        c.ask("tools_rev", "a1").expect("rev"),
        rev,
        "the revision did not move"
    );
    std::fs::write(&file, "description: v3\ncommand: [broken\n").expect("break");
    let r = crate::procs_util::call(&mut c, &[("tool", "greet"), ("agent", "a1")]);
    let text = crate::procs_util::error_text(&r);
    assert!(text.contains("no longer loads"), "{text}");
    assert!(text.contains("toolsrv load a1 greet"), "{text}");
}

/// A loaded tool's file stamp (`toolsrv_base::FileStamp`) includes its mode
/// and status-change time: a `chmod` of the file reloads the tool at its next
/// call, as an edit does (the revision moves).
#[test]
fn a_chmod_of_a_loaded_tool_file_reloads_it_at_the_next_call() {
    use std::os::unix::fs::PermissionsExt;
    let (srv, mut c) = crate::procs_util::tools_session(
        &[("greet.yaml", "description: v1\ncommand: \"echo one\"\n")],
        &[],
    );
    let r = crate::procs_util::call(&mut c, &[("tool", "greet"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "one");
    let rev = c.ask("tools_rev", "a1").expect("rev");
    let file = srv.tools_dir().join("greet.yaml");
    let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
    let other = if mode & 0o777 == 0o600 { 0o640 } else { 0o600 };
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(other)).expect("chmod");
    let r = crate::procs_util::call(&mut c, &[("tool", "greet"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "one");
    assert_ne!(
        c.ask("tools_rev", "a1").expect("rev"),
        rev,
        "the revision did not move after a chmod"
    );
}

/// `describe` shows a tool's description and parameters.
#[test]
fn describe_prints_a_tools_description_and_parameters() {
    let srv = Server::start(&["--no-auth"]);
    let (code, out, err) = cli(&srv.socket, &["describe", "file_read"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("file_read\n"), "{out}");
    assert!(out.contains("path") && out.contains("required"), "{out}");
    assert!(out.contains("default 2000"), "{out}");
}

/// Servers without a tools directory share one content-addressed copy of the
/// built-in tools; servers killed with SIGKILL leave nothing behind (before,
/// each start left a `toolsrv-builtin-XXXXXX` in the temporary directory).
#[test]
fn killed_servers_leave_no_copies_of_the_builtin_tools() {
    let home = tempfile::tempdir().expect("home");
    let tmp = tempfile::tempdir().expect("tmp");
    for i in 0..3 {
        let mut srv = Launch::new()
            .cwd(home.path())
            .listen(&home.path().join(format!("s{i}.sock")))
            .arg("--no-auth")
            .env("HOME", home.path())
            .env_remove("XDG_CACHE_HOME")
            .env("TMPDIR", tmp.path())
            .start();
        let (_, out, err) = cli(&srv.socket, &["all"]);
        assert!(out.contains("file_read"), "{out}{err}");
        srv.kill();
    }
    let litter: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("toolsrv-builtin-"))
        .collect();
    assert!(litter.is_empty(), "left behind: {litter:?}");
    let copies = std::fs::read_dir(home.path().join(".cache/toolsrv"))
        .expect("cache dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("builtin-"))
        .count();
    assert_eq!(copies, 1);
}

/// `call --stream` prints output as the tool writes it, and Ctrl-C keeps what
/// was printed and kills the tool (before, a call printed nothing until the
/// tool ended, and Ctrl-C lost it all).
#[test]
fn a_streamed_call_prints_as_it_goes_and_ctrl_c_keeps_the_output() {
    use std::io::Read;
    let srv = Server::start(&["--no-auth"]);
    let (code, out, err) = cli(
        &srv.socket,
        &[
            "call",
            "--stream",
            "shell",
            "command=echo a; echo b; exit 3",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "a\nb\nexit status 3\n", "{err}");
    let mut child = Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&srv.socket)
        .args([
            "call",
            "--stream",
            "shell",
            "command=echo first; exec sleep 30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 64];
    while !String::from_utf8_lossy(&seen).contains("first") {
        let n = stdout.read(&mut buf).expect("read");
        assert!(n > 0, "the call ended before printing");
        seen.extend_from_slice(&buf[..n]);
    }
    // Safety: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    let mut c = srv.attached();
    assert!(
        wait_until(WAIT, || crate::procs_util::list(&mut c, None)
            .iter()
            .all(|p| p["state"] != "running")),
        "the tool still runs after Ctrl-C"
    );
}

/// Socket activation (systemd's `LISTEN_FDS`): the daemon serves the listening
/// socket it was given as descriptor 3, and leaves the socket file (the
/// service manager's) in place when it stops.
#[test]
fn the_daemon_serves_a_socket_passed_by_the_service_manager() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = tempfile::tempdir().expect("cwd");
    let socket = dir.path().join("activated.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let fd = listener.as_raw_fd();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" \"$@\"")
        .arg(toolsrv_bin())
        .args(["serve", "--no-auth", "--listen"])
        .arg(&socket)
        .arg("--cwd")
        .arg(cwd.path())
        .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Safety: only dup2/fcntl (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn");
    drop(listener);
    let (code, out, err) = cli(&socket, &["info"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("platform"), "{out}");
    // Safety: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut status = None;
    assert!(wait_until(WAIT, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    }));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(
        socket.exists(),
        "the service manager's socket file was removed"
    );
}

/// Completions, the manual page and `--version` come from the binary itself.
#[test]
fn completions_man_page_and_version() {
    let run = |args: &[&str]| {
        let out = Command::new(toolsrv_bin())
            .args(args)
            .output()
            .expect("run");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(run(&["completions", "bash"]).contains("_toolsrv"));
    assert!(run(&["completions", "zsh"]).contains("#compdef toolsrv"));
    let man = run(&["man"]);
    assert!(man.contains(".TH toolsrv 1"), "{man}");
    let v = run(&["--version"]);
    assert!(
        v.starts_with("toolsrv ") && v.contains(" (") && v.trim_end().ends_with(')'),
        "{v}"
    );
}

/// `interpreter: python3` finds the real interpreter, not a version
/// manager's shim earlier in `PATH` (a script that execs files the sandbox does
/// not grant: it failed with "Permission denied", exit 126).
#[test]
fn an_interpreter_is_the_real_program_not_a_shim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shims = dir.path().join("shims");
    let libexec = dir.path().join("libexec");
    std::fs::create_dir(&shims).expect("shims");
    std::fs::create_dir(&libexec).expect("libexec");
    crate::procs_util::write_tool(
        &libexec,
        "pyenv",
        "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n",
    );
    crate::procs_util::write_tool(
        &shims,
        "python3",
        &format!(
            "#!/bin/sh\nexec {} \"$@\"\n",
            libexec.join("pyenv").display()
        ),
    );
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools");
    std::fs::write(tools.join("hello"), "print('hello from python')\n").expect("script");
    std::fs::write(
        tools.join("hello.yaml"),
        "description: Say hello\ninterpreter: python3\n",
    )
    .expect("meta");
    let path = format!("{}:/usr/bin:/bin", shims.display());
    let tools_s = tools.display().to_string();
    let srv = Launch::new()
        .env("PATH", &path)
        .args(["--no-auth", "--tools", &tools_s])
        .start();
    let mut c = srv.attached();
    crate::procs_util::load(&mut c, "a1", "hello");
    let r = crate::procs_util::call(&mut c, &[("tool", "hello"), ("agent", "a1")]);
    assert_eq!(
        crate::procs_util::ok_text(&r).trim(),
        "hello from python",
        "{r}"
    );
    drop(dir);
}

/// `serve --help` lists what `serve` takes, not the client's flags.
#[test]
fn serve_help_lists_only_serve_flags() {
    let out = Command::new(toolsrv_bin())
        .args(["serve", "--help"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--listen") && help.contains("--secret-file"),
        "{help}"
    );
    assert!(
        !help.contains("--json") && !help.contains("--socket "),
        "{help}"
    );
}
