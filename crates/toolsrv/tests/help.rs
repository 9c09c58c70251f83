//! Issue 28: the help texts and manual pages a new user reads first.

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};

use crate::util::toolsrv_bin;

fn toolsrv(args: &[&str]) -> Output {
    Command::new(toolsrv_bin())
        .args(args)
        .env_remove("TOOLSRV_SOCKET")
        .stdin(Stdio::null())
        .output()
        .expect("run toolsrv")
}

/// `toolsrv <args> --help`, which must succeed.
fn help(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--help");
    let out = toolsrv(&all);
    assert!(out.status.success(), "{all:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The commands that never talk to a server show none of the client's flags,
/// `-V` is shown only at the top level, and the client commands keep them.
#[test]
fn only_client_commands_show_the_client_flags() {
    for cmd in ["init", "completions", "man"] {
        let h = help(&[cmd]);
        for flag in ["--socket", "--secret-file", "--json", "--version"] {
            assert!(!h.contains(flag), "`{cmd} --help` shows {flag}:\n{h}");
        }
    }
    let serve = help(&["serve"]);
    assert!(
        !serve.contains("--socket") && !serve.contains("--json"),
        "{serve}"
    );
    assert!(!serve.contains("--version"), "{serve}");
    assert!(
        serve.contains("--secret-file <FILE>") && serve.contains("Accept only the secret in FILE"),
        "serve keeps its own --secret-file:\n{serve}"
    );
    for cmd in ["ps", "call", "stat", "mcp"] {
        let h = help(&[cmd]);
        assert!(
            h.contains("--socket") && h.contains("--secret-file") && h.contains("--json"),
            "`{cmd} --help`:\n{h}"
        );
        assert!(!h.contains("--version"), "`{cmd} --help`:\n{h}");
        assert!(!h.contains("With `serve`"), "`{cmd} --help`:\n{h}");
    }
    let top = help(&[]);
    assert!(top.contains("-V, --version"), "{top}");
}

/// A client flag given to a command that does not use it is a usage error
/// naming the flag, not silently ignored.
#[test]
fn client_flags_on_local_commands_are_refused() {
    for (args, flag) in [
        (&["init", "--socket", "/tmp/x.sock"][..], "--socket"),
        (&["--json", "completions", "bash"][..], "--json"),
        (&["man", "--secret-file", "/tmp/x"][..], "--secret-file"),
        (
            &["serve", "--listen", "/tmp/x.sock", "--socket", "/y"][..],
            "--socket",
        ),
    ] {
        let out = toolsrv(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

/// `bg` prints a pid: its help does not offer `call`'s streaming flags, and
/// they are refused there.
#[test]
fn bg_has_no_streaming_flags() {
    let bg = help(&["bg"]);
    assert!(
        !bg.contains("--stream") && !bg.contains("--no-stream"),
        "{bg}"
    );
    let call = help(&["call"]);
    assert!(
        call.contains("--stream") && call.contains("--no-stream"),
        "{call}"
    );
    let out = toolsrv(&["bg", "--stream", "shell"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`bg` prints only the pid"), "{err}");
}

/// `--ollie` says what it is for, and the help says where the configuration
/// (the Ollie configuration directory) is.
#[test]
fn ollie_and_the_configuration_directory_are_explained() {
    let serve = help(&["serve"]);
    assert!(
        serve.contains("completion messages") && serve.contains("agent host"),
        "{serve}"
    );
    for h in [serve, help(&[])] {
        assert!(
            h.contains("Ollie configuration directory")
                && h.contains("$OLLIE_CFG_PATH")
                && h.contains("~/.config/ollie"),
            "{h}"
        );
    }
}

/// The page references (`toolsrv-serve(1)`) in the roff text.
fn page_refs(roff: &str) -> BTreeSet<String> {
    roff.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '\\' | '(' | ')')))
        .filter_map(|w| {
            let w = w.replace("\\-", "-");
            let name = w.strip_suffix("(1)")?;
            name.starts_with("toolsrv").then(|| format!("{name}.1"))
        })
        .collect()
}

/// `man --out DIR` writes a page for every subcommand, every page a page
/// refers to exists, and `man <subcommand>` prints that one.
#[test]
fn every_manual_page_referred_to_is_generated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("man1");
    let out = toolsrv(&["man", "--out", out_dir.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    let files: BTreeSet<String> = std::fs::read_dir(&out_dir)
        .expect("read man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    for page in [
        "toolsrv.1",
        "toolsrv-serve.1",
        "toolsrv-remote.1",
        "toolsrv-remote-up.1",
    ] {
        assert!(files.contains(page), "{page} missing from {files:?}");
        assert!(listed.contains(page), "{page} not listed:\n{listed}");
    }
    assert!(
        !files
            .iter()
            .any(|f| f.contains("supervise") || f.contains("help")),
        "{files:?}"
    );
    let mut refs = BTreeSet::new();
    for f in &files {
        let roff = std::fs::read_to_string(out_dir.join(f)).expect("read page");
        refs.extend(page_refs(&roff));
    }
    assert!(refs.contains("toolsrv-serve.1"), "{refs:?}");
    let missing: Vec<_> = refs.difference(&files).collect();
    assert!(
        missing.is_empty(),
        "pages referred to but not generated: {missing:?}"
    );

    let serve = toolsrv(&["man", "serve"]);
    let serve = String::from_utf8_lossy(&serve.stdout);
    assert!(
        serve.contains(".TH toolsrv-serve 1") && serve.contains("listen"),
        "{serve}"
    );
    assert!(
        serve.contains(".SH CONFIGURATION") && !serve.contains(".SH EXTRA"),
        "{serve}"
    );
    let up = toolsrv(&["man", "remote", "up"]);
    assert!(String::from_utf8_lossy(&up.stdout).contains(".TH toolsrv-remote-up 1"));
    let bad = toolsrv(&["man", "nope"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no manual page for `toolsrv nope`") && err.contains("serve"),
        "{err}"
    );
}

/// A manual page's SYNOPSIS shows what each option takes
/// (`[--cwd PATH]`, not clap_mangen's bare `[--cwd]`).
#[test]
fn the_man_pages_synopsis_shows_option_values() {
    let out = std::process::Command::new(crate::util::toolsrv_bin())
        .args(["man", "serve"])
        .output()
        .expect("toolsrv man serve");
    let page = String::from_utf8_lossy(&out.stdout);
    let synopsis = page
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.split(".SH").next())
        .expect("a SYNOPSIS section");
    for want in [
        r"[\fB\-\-cwd\fR \fIPATH\fR]",
        r"[\fB\-\-idle\-timeout\fR \fIDURATION\fR]",
        r"[\fB\-\-yolo\fR]",
    ] {
        assert!(synopsis.contains(want), "{want} missing from: {synopsis}");
    }
    assert!(synopsis.contains(r"<\fB\-\-listen\fR \fI"), "{synopsis}");
}
