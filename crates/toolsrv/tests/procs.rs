//! docs/protocol.md, "Requests and results" basics over the socket: payload escaping, arguments reaching the
//! tool verbatim, refused requests, exit status, `wait`, image output.

use std::time::Duration;

use serde_json::{json, Value};
use toolsrv_wire::Body;

use crate::procs_util::{
    bg, call, call_held, error_text, final_stat, ok_text, only_proc, start_read, stat, text,
    tools_server, tools_session,
};
use crate::util::WAIT;

const ECHO_ARG: &str = "#!/bin/sh\n# ---\n# description: Print v\n# params:\n#   v: {type: string, description: value, required: true}\n# ---\nprintf '%s' \"$ARG_V\"\n";
const ECHO_TPL: &str = "description: Print v\nparams:\n  v: {type: string, description: value, required: true}\ncommand: \"printf '%s' {v}\"\n";
const SHOW_ARGS: &str = "#!/bin/sh\n# ---\n# description: Show argv and env\n# params:\n#   v: {type: string, description: value, required: true}\n# ---\nfor a in \"$@\"; do printf 'argv=%s\\n' \"$a\"; done\nprintf 'ARG_V=%s\\n' \"$ARG_V\"\nprintf 'TOOL_ARGS=%s\\n' \"$TOOL_ARGS\"\n";
const RUN: &str = "description: Run a command (deliberately evaluates it)\nparams:\n  cmd: {type: string, description: command, required: true}\ncommand: \"sh -c {cmd}\"\n";
const TYPED: &str = "description: Typed\nparams:\n  n: {type: integer, description: n, required: true}\n  b: {type: boolean, description: b}\ncommand: \"echo {n} {b}\"\n";
const CLOSED: &str = "description: Closed schema\ninputSchema:\n  type: object\n  properties:\n    x: {type: string, description: x}\n  additionalProperties: false\ncommand: \"echo {x}\"\n";
const FAIL: &str = "description: Fail\ncommand: \"echo out; exit 3\"\n";
const GATE: &str =
    "description: Wait for ./go\ncommand: \"while [ ! -e go ]; do sleep 0.02; done; exit 4\"\n";

/// A 1x1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

fn unique() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{t}", std::process::id())
}

#[test]
fn payload_escaping_round_trips_backslashes_and_newlines() {
    let (_srv, mut c) = tools_session(&[("echo_arg", ECHO_ARG), ("echo_tpl.yaml", ECHO_TPL)], &[]);
    let values = [
        "a\\b",
        "line1\nline2",
        "a literal \\n stays a backslash and an n",
        "ends with a backslash\\",
        "\\\\ two backslashes",
        "\\\n\\n\n\n\\",
        "trailing newline\n",
        "\nleading newline",
        "key=value=more\ttab \u{e9}\u{1F600}",
        "\\x \\t \\0 \\",
    ];
    for tool in ["echo_arg", "echo_tpl"] {
        for v in values {
            let r = call(&mut c, &[("tool", tool), ("agent", "a1"), ("v", v)]);
            assert_eq!(ok_text(&r).as_bytes(), v.as_bytes(), "{tool}: {v:?}");
        }
    }
}

#[test]
fn a_value_ending_in_a_carriage_return_round_trips() {
    // docs/protocol.md, "Requests and results": every byte other than the two escapes is itself.
    let (_srv, mut c) = tools_session(&[("echo_arg", ECHO_ARG)], &[]);
    for v in ["ends in cr\r", "cr\r\nlf"] {
        let r = call(&mut c, &[("tool", "echo_arg"), ("agent", "a1"), ("v", v)]);
        assert_eq!(ok_text(&r).as_bytes(), v.as_bytes(), "{v:?}");
    }
}

/// A value full of shell syntax, and the files it would create if evaluated.
fn hostile(srv: &crate::util::Server) -> (String, Vec<std::path::PathBuf>) {
    let u = unique();
    let in_cwd: Vec<_> = (1..=3)
        .map(|i| srv.cwd().join(format!("pwned-{u}-{i}")))
        .collect();
    let tmp = std::path::PathBuf::from(format!("/tmp/pwned-{u}"));
    let v = format!(
        "it's $(touch {}) `touch {}` '; touch {} #' $(touch {}) \" $HOME ${{IFS}} \\",
        in_cwd[0].display(),
        in_cwd[1].display(),
        in_cwd[2].display(),
        tmp.display()
    );
    let mut files = in_cwd;
    files.push(tmp);
    (v, files)
}

/// The paths the hostile value names are writable by a tool: evaluating
/// `touch` there does create the file (so the negative checks can fail).
fn assert_writable_control(c: &mut crate::util::Raw, srv: &crate::util::Server) {
    let p = srv.cwd().join(format!("control-{}", unique()));
    let cmd = format!("touch {}", p.display());
    let r = call(c, &[("tool", "run"), ("agent", "a1"), ("cmd", &cmd)]);
    ok_text(&r);
    assert!(p.exists(), "control: a tool can create files in the cwd");
}

/// None of the `files` a hostile value would have created exists.
fn assert_none_created(files: &[std::path::PathBuf]) {
    for f in files {
        assert!(
            !f.exists(),
            "{} was created: the value was evaluated",
            f.display()
        );
    }
}

#[test]
fn a_hostile_value_reaches_a_command_template_verbatim_and_runs_nothing() {
    let (srv, mut c) = tools_session(&[("echo_tpl.yaml", ECHO_TPL), ("run.yaml", RUN)], &[]);
    assert_writable_control(&mut c, &srv);
    let (v, files) = hostile(&srv);
    let r = call(&mut c, &[("tool", "echo_tpl"), ("agent", "a1"), ("v", &v)]);
    assert_eq!(ok_text(&r), v);
    assert_none_created(&files);
}

#[test]
fn a_hostile_value_reaches_an_executable_verbatim_in_argv_and_env() {
    let (srv, mut c) = tools_session(&[("show_args", SHOW_ARGS), ("run.yaml", RUN)], &[]);
    assert_writable_control(&mut c, &srv);
    let (v, files) = hostile(&srv);
    let r = call(&mut c, &[("tool", "show_args"), ("agent", "a1"), ("v", &v)]);
    let out = ok_text(&r);
    let tool_args = serde_json::to_string(&json!({ "v": v })).expect("json");
    assert_eq!(
        out,
        format!("argv=--v\nargv={v}\nARG_V={v}\nTOOL_ARGS={tool_args}\n")
    );
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("TOOL_ARGS="))
        .expect("TOOL_ARGS line");
    let parsed: Value = serde_json::from_str(line).expect("TOOL_ARGS is JSON");
    assert_eq!(parsed, json!({ "v": v }));
    assert_none_created(&files);
}

#[test]
fn typed_arguments_convert_and_conversion_errors_name_the_argument() {
    let (_srv, mut c) = tools_session(&[("typed.yaml", TYPED), ("closed.yaml", CLOSED)], &[]);
    let ok = call(
        &mut c,
        &[
            ("tool", "typed"),
            ("agent", "a1"),
            ("n", "2"),
            ("b", "true"),
        ],
    );
    assert_eq!(ok_text(&ok), "2 true\n");

    let e = error_text(&call(
        &mut c,
        &[("tool", "typed"), ("agent", "a1"), ("n", "2.5")],
    ));
    assert!(
        e.contains("\"n\"") && e.contains("integer") && e.contains("2.5"),
        "{e}"
    );
    let e = error_text(&call(
        &mut c,
        &[("tool", "typed"), ("agent", "a1"), ("n", "1"), ("b", "yes")],
    ));
    assert!(
        e.contains("\"b\"") && e.contains("boolean") && e.contains("yes"),
        "{e}"
    );
    let e = error_text(&call(
        &mut c,
        &[("tool", "typed"), ("agent", "a1"), ("b", "false")],
    ));
    assert!(e.contains("\"n\"") && e.contains("required"), "{e}");
    let e = error_text(&call(
        &mut c,
        &[
            ("tool", "closed"),
            ("agent", "a1"),
            ("x", "1"),
            ("zzz", "2"),
        ],
    ));
    assert!(e.contains("\"zzz\"") && e.contains("unknown"), "{e}");
    // An open schema takes extra arguments.
    let r = call(
        &mut c,
        &[
            ("tool", "typed"),
            ("agent", "a1"),
            ("n", "1"),
            ("extra", "x"),
        ],
    );
    ok_text(&r);
    // Duplicate keys, argument and reserved.
    let dup = "tool=typed\nagent=a1\nn=1\nn=2\n";
    let r: Value = serde_json::from_str(&c.ask("proc/new", dup).expect("ask")).expect("json");
    let e = error_text(&r);
    assert!(e.contains("duplicate") && e.contains("\"n\""), "{e}");
    let dup = "tool=typed\nagent=a1\nagent=a1\nn=1\n";
    let r: Value = serde_json::from_str(&c.ask("proc/new", dup).expect("ask")).expect("json");
    let e = error_text(&r);
    assert!(e.contains("duplicate") && e.contains("\"agent\""), "{e}");
    // The background form fails the read with the same text.
    let sync = error_text(&call(
        &mut c,
        &[("tool", "typed"), ("agent", "a1"), ("n", "2.5")],
    ));
    let e = bg(&mut c, &[("tool", "typed"), ("agent", "a1"), ("n", "2.5")]).unwrap_err();
    assert_eq!(e, sync);
    // Nothing ran for any refused request: two calls ran (pids 1 and 2, their
    // entries gone once their results were read), so the next run is pid 3.
    let next = bg(&mut c, &[("tool", "typed"), ("agent", "a1"), ("n", "1")]);
    assert_eq!(next, Ok(3));
}

#[test]
fn a_wrong_or_missing_token_is_invalid_token() {
    let srv = tools_server(&[("echo_arg", ECHO_ARG)], &[]);
    let (mut c, token) = srv.authed("s3cret");
    crate::procs_util::load(&mut c, "a1", "echo_arg");
    let good = call(
        &mut c,
        &[
            ("token", &token),
            ("tool", "echo_arg"),
            ("agent", "a1"),
            ("v", "hi"),
        ],
    );
    assert_eq!(ok_text(&good), "hi");
    let wrong = "0".repeat(64);
    for fields in [
        vec![
            ("token", wrong.as_str()),
            ("tool", "echo_arg"),
            ("agent", "a1"),
            ("v", "x"),
        ],
        vec![("tool", "echo_arg"), ("agent", "a1"), ("v", "x")],
        vec![
            ("token", ""),
            ("tool", "echo_arg"),
            ("agent", "a1"),
            ("v", "x"),
        ],
    ] {
        assert_eq!(
            error_text(&call(&mut c, &fields)),
            "invalid token",
            "{fields:?}"
        );
        assert_eq!(
            bg(&mut c, &fields).unwrap_err(),
            "invalid token",
            "{fields:?}"
        );
    }
    // Nothing ran for a refused request: the one good call took pid 1 (its
    // entry went once its result was read), so the next run is pid 2.
    let next = bg(
        &mut c,
        &[
            ("token", &token),
            ("tool", "echo_arg"),
            ("agent", "a1"),
            ("v", "y"),
        ],
    );
    assert_eq!(next, Ok(2));
}

#[test]
fn a_tool_not_loaded_and_an_unknown_profile_are_error_results() {
    let (_srv, mut c) = tools_session(&[("echo_arg", ECHO_ARG)], &[]);
    let f = [("tool", "echo_arg"), ("agent", "a9"), ("v", "x")];
    let want = "tool \"echo_arg\" is not loaded for agent \"a9\"";
    assert_eq!(error_text(&call(&mut c, &f)), want);
    assert_eq!(bg(&mut c, &f).unwrap_err(), want);
    let f = [
        ("tool", "echo_arg"),
        ("agent", "a1"),
        ("sandbox", "nope"),
        ("v", "x"),
    ];
    let want = "unknown sandbox profile \"nope\"";
    assert_eq!(error_text(&call(&mut c, &f)), want);
    assert_eq!(bg(&mut c, &f).unwrap_err(), want);
    // `default` names the policy itself.
    let f = [
        ("tool", "echo_arg"),
        ("agent", "a1"),
        ("sandbox", "default"),
        ("v", "x"),
    ];
    assert_eq!(ok_text(&call(&mut c, &f)), "x");
}

#[test]
fn a_non_zero_exit_is_an_error_ending_with_the_exit_status() {
    let (_srv, mut c) = tools_session(&[("fail.yaml", FAIL)], &[]);
    let r = call_held(&mut c, 91, &[("tool", "fail"), ("agent", "a1")]);
    let t = error_text(&r);
    assert!(t.starts_with("out\n"), "{t:?}");
    assert_eq!(
        t.trim_end_matches('\n').lines().last(),
        Some("exit status 3"),
        "{t:?}"
    );
    let st = only_proc(&mut c, "a1");
    assert_eq!(st["state"], "exited");
    assert_eq!(st["exit_code"], 3);
    assert_eq!(st["background"], false);
    let pid = st["pid"].as_u64().expect("pid");
    assert_eq!(c.read_file(&format!("proc/{pid}/wait")), b"3\n");
    assert_eq!(c.read_file(&format!("proc/{pid}/out")), b"out\n");
    c.ok(toolsrv_wire::Body::Tclunk { fid: 91 });
}

#[test]
fn a_program_that_cannot_start_is_a_failed_run_that_says_why() {
    // The spawn does not wait for the child's execve: the failure is learnt
    // when the child (exit status 127) is reaped, and reported as before.
    let missing = "description: Missing\nexecutable: /nonexistent/toolsrv-prog\n";
    let (_srv, mut c) = tools_session(&[("missing.yaml", missing)], &[]);
    let r = call_held(&mut c, 91, &[("tool", "missing"), ("agent", "a1")]);
    assert_eq!(
        error_text(&r),
        "cannot start /nonexistent/toolsrv-prog: No such file or directory (os error 2)"
    );
    let st = only_proc(&mut c, "a1");
    c.ok(toolsrv_wire::Body::Tclunk { fid: 91 });
    assert_eq!(st["state"], "failed");
    assert_eq!(st["exit_code"], 127);
    let pid = bg(&mut c, &[("tool", "missing"), ("agent", "a1")]).expect("bg");
    assert_eq!(c.read_file(&format!("proc/{pid}/wait")), b"127\n");
    assert_eq!(
        c.read_file(&format!("proc/{pid}/out")),
        b"cannot start /nonexistent/toolsrv-prog: No such file or directory (os error 2)"
    );
}

#[test]
fn wait_blocks_until_the_process_exits_and_returns_the_code() {
    let (srv, mut c) = tools_session(&[("gate.yaml", GATE)], &[]);
    let pid = bg(&mut c, &[("tool", "gate"), ("agent", "a1")]).expect("bg");
    let tag = start_read(&mut c, 300, &format!("proc/{pid}/wait"), "");
    // No reply while the tool waits for ./go.
    c.s.set_read_timeout(Some(Duration::from_millis(400)))
        .expect("timeout");
    assert!(
        c.try_recv().is_none(),
        "wait returned while the process runs"
    );
    c.s.set_read_timeout(Some(WAIT)).expect("timeout");
    assert_eq!(stat(&mut c, pid)["state"], "running");
    std::fs::write(srv.cwd().join("go"), "").expect("go");
    let f = c.recv();
    assert_eq!(f.tag, tag);
    assert_eq!(
        f.body,
        Body::Rread {
            data: b"4\n".to_vec()
        }
    );
    let st = final_stat(&mut c, pid);
    assert_eq!(st["state"], "exited");
    assert_eq!(st["exit_code"], 4);
    // Reading at the end gives 0 bytes.
    c.ok(Body::Tread {
        fid: 300,
        offset: 2,
        count: 100,
    });
    assert_eq!(c.read_file(&format!("proc/{pid}/wait")), b"4\n");
}

#[test]
fn image_output_is_an_image_item_and_auto_text_is_text() {
    let img =
        format!("description: Image\noutput: image\ncommand: \"echo {PNG_B64} | base64 -d\"\n");
    let auto_img =
        format!("description: Auto image\noutput: auto\ncommand: \"echo {PNG_B64} | base64 -d\"\n");
    let auto_txt = "description: Auto text\noutput: auto\ncommand: \"echo plain text\"\n";
    let (_srv, mut c) = tools_session(
        &[
            ("img.yaml", &img),
            ("auto_img.yaml", &auto_img),
            ("auto_txt.yaml", auto_txt),
        ],
        &[],
    );
    let want = json!({
        "content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}],
        "isError": false
    });
    assert_eq!(call(&mut c, &[("tool", "img"), ("agent", "a1")]), want);
    assert_eq!(call(&mut c, &[("tool", "auto_img"), ("agent", "a1")]), want);
    let r = call(&mut c, &[("tool", "auto_txt"), ("agent", "a1")]);
    assert_eq!(
        r,
        json!({"content": [{"type": "text", "text": "plain text\n"}], "isError": false})
    );
    assert_eq!(text(&r), "plain text\n");
}

#[test]
fn a_payload_with_token_field_is_ignored_without_auth() {
    let (_srv, mut c) = tools_session(&[("echo_arg", ECHO_ARG)], &[]);
    let r = call(
        &mut c,
        &[
            ("token", "whatever"),
            ("tool", "echo_arg"),
            ("agent", "a1"),
            ("v", "ok"),
        ],
    );
    assert_eq!(ok_text(&r), "ok");
}
