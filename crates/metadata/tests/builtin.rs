//! The built-in tool set: written out, parsed, and actually run.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{linux, obj, run, text};
use serde_json::{json, Value};
use toolsrv_metadata::{builtin_files, write_builtin, Catalog};

const HOSTILE: &str = "it's $(touch pwned) `touch pwned2` \\n back\\slash\n\"dq\" {x} %s";

/// A tools dir with the built-ins and a separate work dir to run them in.
fn setup() -> (tempfile::TempDir, Catalog, tempfile::TempDir) {
    let tools = tempfile::tempdir().expect("tempdir");
    write_builtin(tools.path()).expect("write builtins");
    let cat = linux(tools.path());
    (tools, cat, tempfile::tempdir().expect("work dir"))
}

fn call(cat: &Catalog, work: &Path, tool: &str, args: Value) -> (bool, Option<i32>, String) {
    let inv = cat
        .resolve(tool)
        .expect(tool)
        .invocation(&obj(args))
        .expect("invocation");
    let out = run(&inv, work);
    (out.status.success(), out.status.code(), text(&out))
}

fn assert_not_pwned(work: &Path) {
    assert!(!work.join("pwned").exists() && !work.join("pwned2").exists());
}

#[test]
fn write_builtin_never_overwrites_and_sets_modes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("a/b/tools");
    fs::create_dir_all(&tools).expect("mkdir");
    fs::write(tools.join("file_read"), "mine").expect("write");
    let written = write_builtin(&tools).expect("write builtins");
    assert_eq!(written.len(), builtin_files().len() - 1);
    assert!(!written.contains(&tools.join("file_read")));
    assert_eq!(
        fs::read_to_string(tools.join("file_read")).expect("read"),
        "mine"
    );
    for f in builtin_files() {
        let mode = fs::metadata(tools.join(f.name))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        if f.name != "file_read" {
            assert_eq!(mode, if f.executable { 0o755 } else { 0o644 }, "{}", f.name);
            assert_eq!(fs::read(tools.join(f.name)).expect("read"), f.bytes);
        }
    }
    assert!(write_builtin(&tools).expect("again").is_empty());
}

#[test]
fn every_builtin_parses_with_description_and_schema() {
    let (_tools, cat, _work) = setup();
    let names: Vec<String> = cat.all().into_iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "file_edit",
            "file_glob",
            "file_grep",
            "file_read",
            "file_write",
            "shell"
        ]
    );
    let expected: &[(&str, &[&str], &[&str])] = &[
        ("shell", &["command", "timeout"], &["command"]),
        ("file_read", &["path", "offset", "limit"], &["path"]),
        ("file_write", &["path", "content"], &["path", "content"]),
        (
            "file_edit",
            &["path", "old", "new"],
            &["path", "old", "new"],
        ),
        ("file_glob", &["pattern"], &["pattern"]),
        ("file_grep", &["pattern", "path", "vcs"], &["pattern"]),
    ];
    for (name, params, required) in expected {
        let tool = cat.resolve(name).expect(name);
        assert!(tool.description.len() > 20, "{name}: {}", tool.description);
        assert_eq!(tool.param_order, *params, "{name}");
        assert_eq!(tool.input_schema["type"], "object");
        assert_eq!(tool.input_schema["required"], json!(required), "{name}");
        assert_eq!(
            tool.input_schema["additionalProperties"],
            json!(false),
            "{name}: an argument the tool does not take is refused, not ignored"
        );
        for p in *params {
            let prop = &tool.input_schema["properties"][p];
            assert!(
                prop["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{name}.{p}"
            );
        }
    }
    for f in builtin_files() {
        assert!(
            !String::from_utf8_lossy(f.bytes).contains("python"),
            "{}",
            f.name
        );
        assert!(
            !String::from_utf8_lossy(f.bytes).contains("perl"),
            "{}",
            f.name
        );
    }
}

#[test]
fn shell_runs_command_and_reports_status() {
    let (_tools, cat, work) = setup();
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "shell",
        json!({"command": "echo one; echo two >&2"}),
    );
    assert!(ok, "{out}");
    assert!(out.contains("one\n") && out.contains("two\n"), "{out}");
    let (ok, code, _) = call(&cat, work.path(), "shell", json!({"command": "exit 7"}));
    assert!(!ok);
    assert_eq!(code, Some(7));
    let (_, _, out) = call(
        &cat,
        work.path(),
        "shell",
        json!({"command": "printf '%s' \"$PWD\""}),
    );
    assert_eq!(
        fs::canonicalize(out.trim()).expect("pwd"),
        fs::canonicalize(work.path()).expect("work")
    );
}

#[test]
fn file_write_creates_dirs_and_keeps_content_verbatim() {
    let (_tools, cat, work) = setup();
    let content = format!("{HOSTILE}\n\n\n");
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_write",
        json!({"path": "a/b c/d.txt", "content": content}),
    );
    assert!(ok, "{out}");
    assert_eq!(
        fs::read_to_string(work.path().join("a/b c/d.txt")).expect("read"),
        content
    );
    assert!(
        out.contains(&format!("wrote {} bytes", content.len())),
        "{out}"
    );
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_write",
        json!({"path": "-odd", "content": ""}),
    );
    assert!(ok, "{out}");
    assert_eq!(fs::read(work.path().join("-odd")).expect("read"), b"");
    assert_not_pwned(work.path());
}

#[test]
fn file_read_numbers_lines_and_handles_offsets() {
    let (_tools, cat, work) = setup();
    fs::write(work.path().join("f.txt"), "alpha\nbeta\n\tgamma\ndelta").expect("write");
    let (ok, _, out) = call(&cat, work.path(), "file_read", json!({"path": "f.txt"}));
    assert!(ok, "{out}");
    assert_eq!(
        out,
        "     1\talpha\n     2\tbeta\n     3\t\tgamma\n     4\tdelta\n"
    );
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_read",
        json!({"path": "f.txt", "offset": 2, "limit": 2}),
    );
    assert!(ok, "{out}");
    assert_eq!(
        out,
        "     2\tbeta\n     3\t\tgamma\n(1 more lines; continue with offset 4)\n"
    );
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_read",
        json!({"path": "f.txt", "offset": 10}),
    );
    assert!(ok, "offset past the end is not an error: {out}");
    assert_eq!(
        out,
        "(offset 10 is past the end of the file, which has 4 lines)\n"
    );
    let (ok, code, out) = call(
        &cat,
        work.path(),
        "file_read",
        json!({"path": "missing.txt"}),
    );
    assert!(!ok && code == Some(1), "{out}");
    assert!(
        out.contains("file_read: cannot read missing.txt: it does not exist"),
        "{out}"
    );
    fs::write(work.path().join("h.txt"), HOSTILE).expect("write");
    let (ok, _, out) = call(&cat, work.path(), "file_read", json!({"path": "h.txt"}));
    assert!(ok, "{out}");
    assert!(
        out.starts_with(&format!(
            "     1\t{}",
            HOSTILE.lines().next().unwrap_or_default()
        )),
        "{out}"
    );
}

#[test]
fn file_edit_replaces_unique_string_verbatim() {
    let (_tools, cat, work) = setup();
    let path = work.path().join("e.txt");
    fs::write(&path, "one\ntwo\nthree").expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_edit",
        json!({"path": "e.txt", "old": "two\nth", "new": HOSTILE}),
    );
    assert!(ok, "{out}");
    assert_eq!(
        fs::read_to_string(&path).expect("read"),
        format!("one\n{HOSTILE}ree")
    );
    assert_eq!(
        fs::metadata(&path).expect("stat").permissions().mode() & 0o777,
        0o600
    );
    fs::write(&path, "x\n$(y)\nx\n").expect("write");
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_edit",
        json!({"path": "e.txt", "old": "$(y)", "new": "z"}),
    );
    assert!(ok, "{out}");
    assert_eq!(fs::read_to_string(&path).expect("read"), "x\nz\nx\n");
    assert_not_pwned(work.path());
}

#[test]
fn file_edit_refuses_missing_and_repeated_strings() {
    let (_tools, cat, work) = setup();
    let path = work.path().join("e.txt");
    fs::write(&path, "x\nx\n").expect("write");
    let (ok, code, out) = call(
        &cat,
        work.path(),
        "file_edit",
        json!({"path": "e.txt", "old": "x", "new": "y"}),
    );
    assert!(!ok && code == Some(1), "{out}");
    assert_eq!(
        out,
        "old string occurs 2 times in e.txt; it must be unique\n"
    );
    let (ok, code, out) = call(
        &cat,
        work.path(),
        "file_edit",
        json!({"path": "e.txt", "old": "nope", "new": "y"}),
    );
    assert!(!ok && code == Some(1), "{out}");
    assert_eq!(out, "old string not found in e.txt\n");
    assert_eq!(fs::read_to_string(&path).expect("read"), "x\nx\n");
}

#[test]
fn file_glob_lists_matching_files() {
    let (_tools, cat, work) = setup();
    let w = work.path();
    for f in [
        "src/main.rs",
        "src/a/x.rs",
        "src/a/b/y.rs",
        "src/a/b/z.txt",
        "top.rs",
        ".git/c.rs",
        "src/.hid/h.rs",
        "sp ace/q.rs",
    ] {
        let p = w.join(f);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, "").expect("write");
    }
    let glob = |pattern: &str| {
        let (ok, _, out) = call(&cat, w, "file_glob", json!({"pattern": pattern}));
        assert!(ok, "{pattern}: {out}");
        out
    };
    assert_eq!(
        glob("src/**/*.rs"),
        "src/a/b/y.rs\nsrc/a/x.rs\nsrc/main.rs\n"
    );
    assert_eq!(
        glob("**/*.rs"),
        "sp ace/q.rs\nsrc/a/b/y.rs\nsrc/a/x.rs\nsrc/main.rs\ntop.rs\n"
    );
    assert_eq!(glob("*.rs"), "top.rs\n");
    assert_eq!(glob("src/a/[xy].rs"), "src/a/x.rs\n");
    assert_eq!(glob(".git/*"), ".git/c.rs\n");
    assert_eq!(
        glob("src/*.$(touch pwned)"),
        "no files match src/*.$(touch pwned)\n"
    );
    let abs = format!("{}/src/*.rs", w.display());
    assert_eq!(glob(&abs), format!("{}/src/main.rs\n", w.display()));
    assert_not_pwned(w);
}

#[test]
fn file_grep_prints_path_line_text() {
    let (_tools, cat, work) = setup();
    let w = work.path();
    fs::create_dir_all(w.join("d")).expect("mkdir");
    fs::write(w.join("d/a.txt"), "foo\nbar baz\nfoo bar\n").expect("write");
    fs::write(w.join("b.txt"), "nothing\n").expect("write");
    let (ok, _, out) = call(
        &cat,
        w,
        "file_grep",
        json!({"pattern": "ba[rz]$", "path": "d"}),
    );
    assert!(ok, "{out}");
    assert_eq!(out, "d/a.txt:2:bar baz\nd/a.txt:3:foo bar\n");
    let (ok, _, out) = call(&cat, w, "file_grep", json!({"pattern": "noth|zzz"}));
    assert!(ok, "{out}");
    assert_eq!(out, "b.txt:1:nothing\n");
    let (ok, _, out) = call(
        &cat,
        w,
        "file_grep",
        json!({"pattern": "-e $(touch pwned)", "path": "b.txt"}),
    );
    assert!(ok, "{out}");
    assert_eq!(out, "no matches for -e $(touch pwned) in b.txt\n");
    let (ok, _, out) = call(
        &cat,
        w,
        "file_grep",
        json!({"pattern": "x", "path": "absent"}),
    );
    assert!(!ok, "{out}");
    assert_not_pwned(w);
}

#[test]
fn file_write_and_file_edit_take_values_larger_than_a_command_line() {
    let (_tools, cat, work) = setup();
    // Over Linux's 128 KiB per argument or environment string.
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    assert!(big.len() > 140_000, "{}", big.len());
    let tool = cat.resolve("file_write").expect("file_write");
    assert_eq!(tool.file_params, ["content"]);
    assert!(
        tool.input_schema["properties"]["content"]
            .get("file")
            .is_none(),
        "file: true is toolsrv's, not shown to agents: {}",
        tool.input_schema
    );
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_write",
        json!({"path": "big.txt", "content": big}),
    );
    assert!(ok, "{out}");
    assert_eq!(
        fs::read_to_string(work.path().join("big.txt")).expect("read"),
        big
    );
    assert!(out.contains(&format!("wrote {} bytes", big.len())), "{out}");
    // Replace the second half with another large text, without a final newline.
    let half = &big[big.len() / 2..];
    let new = format!("{}tail", half.replace("line", "LINE"));
    let (ok, _, out) = call(
        &cat,
        work.path(),
        "file_edit",
        json!({"path": "big.txt", "old": half, "new": new}),
    );
    assert!(ok, "{out}");
    assert_eq!(
        fs::read_to_string(work.path().join("big.txt")).expect("read"),
        format!("{}{new}", &big[..big.len() / 2])
    );
}
