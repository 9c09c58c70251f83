//! Invocations of every shape, including hostile argument values, checked
//! by actually running them.

use std::path::PathBuf;

use crate::common::{exe, linux, obj, plain, run, text};
use serde_json::json;
use toolsrv_metadata::MetaError;

const HOSTILE: &str = "it's $(touch /tmp/toolsrv-meta-pwned) `touch /tmp/toolsrv-meta-pwned2` \\n back\\slash\nnew line \"dq\"";

fn hostile_args() -> serde_json::Map<String, serde_json::Value> {
    obj(
        json!({"text": HOSTILE, "count": 3, "flag": true, "off": false, "tags": ["a b", "c'd"], "extra": {"k": [1, 2]}, "zz": null}),
    )
}

fn assert_not_pwned() {
    assert!(!PathBuf::from("/tmp/toolsrv-meta-pwned").exists());
    assert!(!PathBuf::from("/tmp/toolsrv-meta-pwned2").exists());
}

const PARAMS: &str = "params:\n  text: {type: string, required: true}\n  count: {type: integer}\n  tags: {type: array}\n  flag: {type: boolean}\n  off: {type: boolean}\n";

#[test]
fn command_tool_invocation() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "c.yaml",
        &format!("{PARAMS}  mode: {{type: string, default: fast}}\n  none: {{type: string}}\ncommand: \"printf '%s|' {{text}} {{count}} {{tags}} {{flag}} {{mode}} {{none}}\"\n"),
    );
    let tool = linux(dir.path()).resolve("c").expect("resolve");
    let inv = tool.invocation(&hostile_args()).expect("invocation");
    assert_eq!(inv.program, PathBuf::from("/bin/sh"));
    assert_eq!(inv.argv[..2], ["sh".to_string(), "-c".to_string()]);
    assert_eq!(
        inv.display,
        format!("sh -c {}", toolsrv_metadata::sh_quote(&inv.argv[2]))
    );
    let out = run(&inv, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{HOSTILE}|3|[\"a b\",\"c'd\"]|true|fast||")
    );
    assert_not_pwned();
}

#[test]
fn executable_invocation_argv_env_display() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = exe(
        dir.path(),
        "e",
        &format!("#!/bin/sh\n# ---\n# {}\n# ---\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done\nprintf '\\n%s\\n' \"$ARG_TEXT\"\n", PARAMS.replace('\n', "\n# ").trim_end_matches("# ")),
    );
    let tool = linux(dir.path()).resolve("e").expect("resolve");
    let inv = tool.invocation(&hostile_args()).expect("invocation");
    assert_eq!(inv.program, script);
    let expected: Vec<String> = [
        script.to_str().expect("utf-8 path"),
        "--text",
        HOSTILE,
        "--count",
        "3",
        "--tags",
        "a b",
        "--tags",
        "c'd",
        "--flag",
        "--extra",
        "{\"k\":[1,2]}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(inv.argv, expected);
    let env: Vec<(&str, &str)> = inv
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(env[0].0, "TOOL_ARGS");
    let tool_args: serde_json::Value = serde_json::from_str(env[0].1).expect("TOOL_ARGS is JSON");
    assert_eq!(tool_args, serde_json::Value::Object(hostile_args()));
    assert_eq!(
        env[1..],
        [
            ("ARG_COUNT", "3"),
            ("ARG_FLAG", "true"),
            ("ARG_OFF", "false"),
            ("ARG_TEXT", HOSTILE)
        ]
    );
    assert_eq!(inv.display, toolsrv_metadata::sh_join(&inv.argv));
    // The display string is a faithful shell rendering of argv.
    let echoed = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "for a in {}; do printf '<%s>' \"$a\"; done",
            &inv.display[inv.display.find(' ').unwrap_or(0)..]
        ))
        .output()
        .expect("sh");
    let out = run(&inv, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&*String::from_utf8_lossy(&echoed.stdout)),
        "{stdout}"
    );
    assert!(stdout.ends_with(&format!("\n{HOSTILE}\n")), "{stdout}");
    assert_not_pwned();
}

#[test]
fn interpreted_invocation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = plain(
        dir.path(),
        "i.sh",
        "# ---\n# interpreter: sh -e\n# params:\n#   text: {type: string}\n# ---\nprintf '%s|%s|%s' \"$1\" \"$2\" \"$ARG_TEXT\"\n",
    );
    let tool = linux(dir.path()).resolve("i.sh").expect("resolve");
    let inv = tool
        .invocation(&obj(json!({"text": HOSTILE})))
        .expect("invocation");
    assert!(inv.program.is_absolute(), "{:?}", inv.program);
    assert!(inv.program.ends_with("sh"));
    assert_eq!(
        inv.argv[1..],
        [
            "-e".to_string(),
            script.display().to_string(),
            "--text".into(),
            HOSTILE.into()
        ]
    );
    let out = run(&inv, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("--text|{HOSTILE}|{HOSTILE}")
    );
    assert_not_pwned();
}

#[test]
fn missing_program_and_nul_bytes_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "m.yaml",
        "executable: no-such-program-toolsrv\n",
    );
    plain(
        dir.path(),
        "n.yaml",
        "params:\n  a: {type: string}\ncommand: echo {a}\n",
    );
    let cat = linux(dir.path());
    let e = cat
        .resolve("m")
        .expect("m")
        .invocation(&obj(json!({})))
        .expect_err("missing");
    assert_eq!(
        e,
        MetaError::ProgramNotFound {
            tool: "m".into(),
            program: "no-such-program-toolsrv".into()
        }
    );
    let e = cat
        .resolve("n")
        .expect("n")
        .invocation(&obj(json!({"a": "x\u{0}y"})))
        .expect_err("nul");
    assert_eq!(
        e.to_string(),
        "argument \"a\" of tool \"n\" contains a NUL byte, which cannot be passed to a process"
    );
}

#[test]
fn bare_executable_is_resolved_through_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(dir.path(), "p.yaml", "executable: env\n");
    let inv = linux(dir.path())
        .resolve("p")
        .expect("p")
        .invocation(&obj(json!({})))
        .expect("inv");
    assert!(
        inv.program.is_absolute() && inv.program.ends_with("env"),
        "{:?}",
        inv.program
    );
    assert_eq!(inv.argv, vec![inv.program.display().to_string()]);
}

#[test]
fn file_arguments_reach_the_tool_in_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(
        dir.path(),
        "f",
        "#!/bin/sh\n# ---\n# params:\n#   a: {type: string, file: true}\n#   b: {type: string}\n#   c: {type: string, file: true}\n# ---\nprintf '%s|' \"$@\"; printf '%s|' \"$ARG_A_FILE\" \"${ARG_A-unset}\" \"$TOOL_ARGS\"; cat \"$ARG_A_FILE\"; cat <&4\n",
    );
    plain(
        dir.path(),
        "t.yaml",
        "params:\n  a: {type: string, file: true}\ncommand: \"wc -c < {a}\"\n",
    );
    let cat = linux(dir.path());
    let tool = cat.resolve("f").expect("f");
    assert_eq!(tool.file_params, ["a", "c"]);
    assert_eq!(
        tool.input_schema["properties"]["a"],
        json!({"type": "string"})
    );
    let inv = tool
        .invocation(&obj(json!({"a": HOSTILE, "b": "bee", "c": "sea"})))
        .expect("invocation");
    assert_eq!(
        inv.argv[1..],
        [
            "--a-file",
            "/proc/self/fd/3",
            "--b",
            "bee",
            "--c-file",
            "/proc/self/fd/4"
        ]
    );
    assert!(inv
        .env
        .contains(&("ARG_A_FILE".into(), "/proc/self/fd/3".into())));
    assert!(inv.env.iter().all(|(k, _)| k != "ARG_A"));
    let out = run(&inv, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "--a-file|/proc/self/fd/3|--b|bee|--c-file|/proc/self/fd/4|/proc/self/fd/3|unset|{{\"b\":\"bee\"}}|{HOSTILE}sea"
        )
    );
    assert_not_pwned();
    // A command template's placeholder is the file's path.
    let tool = cat.resolve("t").expect("t");
    let inv = tool
        .invocation(&obj(json!({"a": "12345"})))
        .expect("invocation");
    assert_eq!(inv.argv[2], "wc -c < '/proc/self/fd/3'");
    let out = run(&inv, dir.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5");
}

#[test]
fn file_true_is_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "n.yaml",
        "params:\n  a: {type: integer, file: true}\ncommand: echo\n",
    );
    plain(
        dir.path(),
        "b.yaml",
        "inputSchema:\n  type: object\n  properties:\n    a: {type: string, file: yes please}\ncommand: echo\n",
    );
    let many: String = (0..9)
        .map(|i| format!("  p{i}: {{type: string, file: true}}\n"))
        .collect();
    plain(
        dir.path(),
        "m.yaml",
        &format!("params:\n{many}command: echo\n"),
    );
    let cat = linux(dir.path());
    let e = cat.resolve("n").expect_err("integer").to_string();
    assert!(
        e.contains("parameter \"a\": file: true needs type: string"),
        "{e}"
    );
    let e = cat.resolve("b").expect_err("not a bool").to_string();
    assert!(
        e.contains("parameter \"a\": file must be true or false"),
        "{e}"
    );
    let e = cat.resolve("m").expect_err("too many").to_string();
    assert!(
        e.contains("9 parameters are declared file: true; at most 8"),
        "{e}"
    );
}

#[test]
fn a_value_too_large_for_a_command_line_is_refused_with_the_numbers() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "w.yaml",
        "params:\n  content: {type: string}\n  other: {type: string}\nexecutable: /bin/true\n",
    );
    let tool = linux(dir.path()).resolve("w").expect("w");
    let e = tool
        .invocation(&obj(json!({"content": "x".repeat(140_000)})))
        .expect_err("too large")
        .to_string();
    assert!(e.starts_with("content is 140000 bytes; tool \"w\" receives its arguments on its command line and in its environment, where Linux takes at most 131059 bytes per value"), "{e}");
    assert!(e.contains("\"file: true\""), "{e}");
    // Each fits, but not the two together as TOOL_ARGS.
    let e = tool
        .invocation(&obj(
            json!({"content": "x".repeat(70_000), "other": "y".repeat(69_000)}),
        ))
        .expect_err("TOOL_ARGS too large")
        .to_string();
    assert!(
        e.starts_with("TOOL_ARGS (the arguments as JSON) is 139025 bytes (content is 70000 of them); tool \"w\""),
        "{e}"
    );
    assert!(e.contains("at most 131061 bytes per value"), "{e}");
    // Just under the limits (the value alone and in TOOL_ARGS) passes.
    tool.invocation(&obj(json!({"content": "x".repeat(131_040)})))
        .expect("fits");
}
