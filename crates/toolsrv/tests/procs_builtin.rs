//! The built-in tools end to end through the CLI (`toolsrv call`), and the
//! process commands `bg`, `wait`, `out`, `kill`, `dismiss`.

use std::process::{Command, Output, Stdio};

use crate::procs_util::stat;
use crate::util::{toolsrv_bin, Server};

/// A `--no-auth` server serving the built-in tools.
fn builtin_server() -> Server {
    Server::start(&["--no-auth"])
}

/// Run the CLI against `srv`.
fn cli(srv: &Server, args: &[&str]) -> Output {
    Command::new(toolsrv_bin())
        .args(args)
        .env("TOOLSRV_SOCKET", &srv.socket)
        .env("TOOLSRV_SECRET", "unused-without-auth")
        .env("OLLIE_CFG_PATH", srv.cwd().join("cfg"))
        .stdin(Stdio::null())
        .output()
        .expect("run the CLI")
}

/// `(exit code, stdout)`; stderr is shown on failure to help debugging.
fn run(srv: &Server, args: &[&str]) -> (i32, String) {
    let o = cli(srv, args);
    let code = o.status.code().unwrap_or(-1);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if code != 0 && code != 1 {
        panic!(
            "{args:?} exited {code}; stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    (code, out)
}

#[test]
fn shell_prints_output_and_reports_a_failing_status() {
    let srv = builtin_server();
    assert_eq!(
        run(&srv, &["call", "shell", "command=echo hi; echo err >&2"]),
        (0, "hi\nerr\n".into())
    );
    assert_eq!(
        run(&srv, &["call", "shell", "command=echo out; exit 3"]),
        (1, "out\nexit status 3\n".into())
    );
    // The command runs in the server's --cwd.
    let (code, out) = run(&srv, &["call", "shell", "command=pwd"]);
    let cwd = std::fs::canonicalize(srv.cwd()).expect("canonical");
    assert_eq!((code, out.trim_end()), (0, cwd.to_str().expect("utf8")));
    // A request the server refuses is an error result too: exit 1 with the reason.
    let (code, out) = run(&srv, &["call", "shell"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("missing required argument \"command\""),
        "{out}"
    );
    // A malformed flag is a usage error, caught before anything is sent: exit 2.
    let o = cli(
        &srv,
        &["call", "--timeout", "nope", "shell", "command=true"],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--timeout") && err.contains("nope"), "{err}");
}

#[test]
fn file_write_then_file_read_with_numbered_lines() {
    let srv = builtin_server();
    assert_eq!(
        run(
            &srv,
            &["call", "file_write", "path=sub/a.txt", "content=one\ntwo\n"]
        ),
        (0, "wrote 8 bytes to sub/a.txt\n".into())
    );
    let written = std::fs::read(srv.cwd().join("sub/a.txt")).expect("written");
    assert_eq!(written, b"one\ntwo\n");
    assert_eq!(
        run(&srv, &["call", "file_read", "path=sub/a.txt"]),
        (0, "     1\tone\n     2\ttwo\n".into())
    );
    assert_eq!(
        run(&srv, &["call", "file_read", "path=sub/a.txt", "offset=2"]),
        (0, "     2\ttwo\n".into())
    );
    assert_eq!(
        run(&srv, &["call", "file_read", "path=sub/a.txt", "limit=1"]),
        (
            0,
            "     1\tone\n(1 more lines; continue with offset 2)\n".into()
        )
    );
    assert_eq!(
        run(&srv, &["call", "file_read", "path=sub/a.txt", "offset=5"]),
        (
            0,
            "(offset 5 is past the end of the file, which has 2 lines)\n".into()
        )
    );
    let (code, out) = run(&srv, &["call", "file_read", "path=sub/a.txt", "offset=x"]);
    assert_eq!(code, 1);
    assert!(out.contains("\"offset\""), "{out}");
}

#[test]
fn file_edit_unique_missing_and_repeated_strings() {
    let srv = builtin_server();
    let dir = srv.cwd().join("sub");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").expect("write");
    std::fs::write(dir.join("b.txt"), "x x\n").expect("write");
    assert_eq!(
        run(
            &srv,
            &[
                "call",
                "file_edit",
                "path=sub/a.txt",
                "old=two",
                "new=three"
            ]
        ),
        (0, "replaced 1 occurrence in sub/a.txt\n".into())
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).expect("read"),
        "one\nthree\n"
    );
    assert_eq!(
        run(
            &srv,
            &["call", "file_edit", "path=sub/a.txt", "old=zzz", "new=y"]
        ),
        (
            1,
            "old string not found in sub/a.txt\nexit status 1\n".into()
        )
    );
    assert_eq!(
        run(
            &srv,
            &["call", "file_edit", "path=sub/b.txt", "old=x", "new=y"]
        ),
        (
            1,
            "old string occurs 2 times in sub/b.txt; it must be unique\nexit status 1\n".into()
        )
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).expect("read"),
        "x x\n"
    );
}

#[test]
fn file_glob_and_file_grep() {
    let srv = builtin_server();
    let dir = srv.cwd().join("sub/deep");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(srv.cwd().join("sub/a.txt"), "one\nthree\n").expect("write");
    std::fs::write(srv.cwd().join("sub/b.txt"), "x\n").expect("write");
    std::fs::write(dir.join("c.txt"), "three times\n").expect("write");
    std::fs::write(dir.join("d.rs"), "fn main() {}\n").expect("write");
    assert_eq!(
        run(&srv, &["call", "file_glob", "pattern=sub/*.txt"]),
        (0, "sub/a.txt\nsub/b.txt\n".into())
    );
    assert_eq!(
        run(&srv, &["call", "file_glob", "pattern=sub/**/*.txt"]),
        (0, "sub/a.txt\nsub/b.txt\nsub/deep/c.txt\n".into())
    );
    assert_eq!(
        run(&srv, &["call", "file_glob", "pattern=nope/*.x"]),
        (0, "no files match nope/*.x\n".into())
    );
    let (code, out) = run(&srv, &["call", "file_grep", "pattern=thr+ee", "path=sub"]);
    assert_eq!(code, 0);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["sub/a.txt:2:three", "sub/deep/c.txt:1:three times"]);
    assert_eq!(
        run(&srv, &["call", "file_grep", "pattern=absent", "path=sub"]),
        (0, "no matches for absent in sub\n".into())
    );
}

#[test]
fn bg_prints_a_pid_and_wait_out_kill_dismiss_work_on_it() {
    let srv = builtin_server();
    let (code, out) = run(
        &srv,
        &["bg", "--agent", "a7", "shell", "command=echo bg; exit 5"],
    );
    assert_eq!(code, 0);
    let pid: u64 = out
        .trim_end()
        .parse()
        .unwrap_or_else(|_| panic!("bg printed {out:?}, not a pid"));
    assert!(
        out.ends_with('\n') && !out.trim_end().contains('\n'),
        "{out:?}"
    );
    let o = cli(&srv, &["wait", &pid.to_string()]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "5\n");
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(run(&srv, &["out", &pid.to_string()]), (0, "bg\n".into()));
    let mut c = srv.attached();
    let st = stat(&mut c, pid);
    assert_eq!(
        (&st["agent"], &st["background"]),
        (&"a7".into(), &true.into())
    );

    let (_, out) = run(&srv, &["bg", "shell", "command=exec sleep 30"]);
    let sleeper = out.trim_end().to_string();
    // Wait until it runs (its stat exists and the tool has been spawned).
    let pid2: u64 = sleeper.parse().expect("pid");
    assert!(crate::util::wait_until(crate::util::WAIT, || {
        cli(&srv, &["kill", &sleeper, "TERM"]).status.success()
    }));
    let o = cli(&srv, &["wait", &sleeper]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "143\n");
    assert_eq!(stat(&mut c, pid2)["state"], "killed");
    assert!(cli(&srv, &["dismiss", &sleeper]).status.success());
    assert_eq!(
        c.walk(70, &format!("proc/{pid2}")).unwrap_err(),
        "file not found"
    );
}

/// `stat` is readable without `--json` (one `field: value` a line, like `ps`
/// is a table), and JSON with it.
#[test]
fn stat_is_readable_and_json_on_request() {
    let srv = builtin_server();
    let (code, out) = run(
        &srv,
        &[
            "bg",
            "--agent",
            "a8",
            "--session",
            "s1",
            "shell",
            "command=exit 4",
        ],
    );
    assert_eq!(code, 0);
    let pid = out.trim_end().to_string();
    assert_eq!(cli(&srv, &["wait", &pid]).status.code(), Some(4));
    let (code, text) = run(&srv, &["stat", &pid]);
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains('{') && !text.contains('"'),
        "not JSON: {text}"
    );
    for line in [
        format!("pid:        {pid}"),
        "tool:       shell".to_string(),
        "agent:      a8".to_string(),
        "session:    s1".to_string(),
        "state:      exited (exit 4)".to_string(),
        "background: yes".to_string(),
        "sandboxed:  yes".to_string(),
        "command:    shell --command 'exit 4'".to_string(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
    let (code, json) = run(&srv, &["--json", "stat", &pid]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).expect("--json is JSON");
    assert_eq!(v["exit_code"], 4, "{v}");
}

/// `tools <agent>` with nothing loaded says so and how to load, on stderr;
/// stdout stays empty (and `--json` is `[]`).
#[test]
fn tools_of_an_agent_with_nothing_loaded_says_how_to_load() {
    let srv = builtin_server();
    let o = cli(&srv, &["tools", "fresh"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "", "{err}");
    assert!(
        err.contains("no tools are loaded for agent fresh")
            && err.contains("toolsrv load fresh TOOL"),
        "{err}"
    );
    assert_eq!(run(&srv, &["--json", "tools", "fresh"]), (0, "[]\n".into()));
    assert_eq!(run(&srv, &["load", "fresh", "shell"]).0, 0);
    let (code, table) = run(&srv, &["tools", "fresh"]);
    assert_eq!(code, 0);
    assert!(
        table.starts_with("NAME") && table.contains("\nshell "),
        "{table}"
    );
}

/// The built-in file tools, refused by the sandbox, say so in their own
/// words, naming the path: not "does not exist", and never the path and line
/// of their script in toolsrv's cache.
#[test]
fn builtin_file_tools_say_the_sandbox_refused_a_path() {
    let srv = builtin_server();
    let home = srv.cwd().parent().expect("the cwd's parent").to_path_buf();
    std::fs::write(home.join("outside.txt"), "not for tools\n").expect("write");
    let refused = |tool: &str, verb: &str, args: &[&str]| {
        let mut all = vec!["call", tool];
        all.extend_from_slice(args);
        let (code, out) = run(&srv, &all);
        assert_eq!(code, 1, "{all:?}: {out}");
        let want = format!(
            "{tool}: {verb} ../outside.txt: permission denied by the sandbox (the path is outside what this tool may"
        );
        assert!(out.starts_with(&want), "{all:?}: {out}");
        assert!(
            !out.contains(".cache") && !out.contains("builtin-"),
            "{out}"
        );
    };
    refused("file_read", "cannot read", &["path=../outside.txt"]);
    refused(
        "file_edit",
        "cannot read",
        &["path=../outside.txt", "old=not", "new=now"],
    );
    refused(
        "file_grep",
        "cannot search",
        &["pattern=for", "path=../outside.txt"],
    );
    refused(
        "file_write",
        "cannot write",
        &["path=../outside.txt", "content=x"],
    );
    let (code, out) = run(&srv, &["call", "file_glob", "pattern=../*.txt"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("file_glob: cannot search ..: permission denied by the sandbox"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("outside.txt")).expect("read"),
        "not for tools\n"
    );
    // The shell tool's own errors name the tool, not its cached script.
    let (code, out) = run(&srv, &["call", "shell", "command=no-such-command-here"]);
    assert_eq!(code, 1, "{out}");
    // (dash: `shell: 1: no-such-command-here: not found`; bash as sh: `shell: line 1: ...`)
    assert!(
        out.starts_with("shell: ") && out.contains("no-such-command-here: "),
        "{out}"
    );
    assert!(
        !out.contains(".cache") && !out.contains("builtin-"),
        "{out}"
    );
    // A path that is not there says that, inside the rules; outside them
    // the view does not tell what exists, and the refusal is the sandbox's.
    let (code, out) = run(&srv, &["call", "file_read", "path=absent.txt"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("file_read: cannot read absent.txt: it does not exist"),
        "{out}"
    );
    let (code, out) = run(&srv, &["call", "file_read", "path=../absent.txt"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("file_read: cannot read ../absent.txt: permission denied by the sandbox"),
        "{out}"
    );
}

/// `file_grep` skips version-control directories unless asked (or searching
/// one), and prints each path one way: `src/...`, never `./src/...`.
#[test]
fn file_grep_skips_vcs_directories_and_prints_paths_one_way() {
    let srv = builtin_server();
    let cwd = srv.cwd();
    for dir in [".git/hooks", ".hg", ".svn", "src"] {
        std::fs::create_dir_all(cwd.join(dir)).expect("mkdir");
    }
    for file in [".git/hooks/pre-push.sample", ".hg/store", ".svn/entries"] {
        std::fs::write(cwd.join(file), "needle in vcs\n").expect("write");
    }
    std::fs::write(cwd.join("src/a.txt"), "needle in src\n").expect("write");
    for path in [None, Some("."), Some("./"), Some("./src"), Some("src")] {
        let mut args = vec!["call", "file_grep", "pattern=needle"];
        let arg = path.map(|p| format!("path={p}"));
        args.extend(arg.as_deref());
        assert_eq!(
            run(&srv, &args),
            (0, "src/a.txt:1:needle in src\n".into()),
            "{path:?}"
        );
    }
    let (code, out) = run(&srv, &["call", "file_grep", "pattern=needle", "vcs=true"]);
    assert_eq!(code, 0, "{out}");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            ".git/hooks/pre-push.sample:1:needle in vcs",
            ".hg/store:1:needle in vcs",
            ".svn/entries:1:needle in vcs",
            "src/a.txt:1:needle in src",
        ]
    );
    assert_eq!(
        run(&srv, &["call", "file_grep", "pattern=needle", "path=.git"]),
        (0, ".git/hooks/pre-push.sample:1:needle in vcs\n".into())
    );
}

/// The built-in tools' schemas are closed (`additionalProperties: false`): a
/// misspelt argument is an error naming it, not silently ignored.
#[test]
fn the_builtin_tools_refuse_an_argument_they_do_not_take() {
    let srv = builtin_server();
    std::fs::write(srv.cwd().join("x"), "one\ntwo\n").expect("write");
    let (code, out) = run(&srv, &["call", "file_read", "path=x", "limt=1"]);
    assert_eq!((code, out.trim_end()), (1, "unknown argument \"limt\""));
    for (tool, args) in [
        ("shell", &["command=true", "comand=true"][..]),
        ("file_write", &["path=y", "content=c", "contents=c"]),
        ("file_edit", &["path=x", "old=one", "new=1", "count=2"]),
        ("file_glob", &["pattern=*", "path=."]),
        ("file_grep", &["pattern=one", "recursive=true"]),
    ] {
        let mut argv = vec!["call", tool];
        argv.extend(args);
        let (code, out) = run(&srv, &argv);
        assert_eq!(code, 1, "{tool}: {out}");
        assert!(out.starts_with("unknown argument \""), "{tool}: {out}");
    }
    assert!(!srv.cwd().join("y").exists(), "file_write ran anyway");
    assert_eq!(run(&srv, &["call", "file_read", "path=x", "limit=1"]).0, 0);
}
