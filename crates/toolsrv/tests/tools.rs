//! docs/protocol.md, "Namespace" control and discovery files, docs/tools.md metadata, the registry.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::util::{toolsrv_bin, Launch, Raw, Server};

fn write(dir: &Path, name: &str, text: &str, exec: bool) {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A server whose tools directory holds one tool of every shape (and some noise).
fn server_with_tools() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    // 1. executable with a header block
    write(
        &tools,
        "wc_lines",
        "#!/bin/sh\n# ---\n# description: Count lines in a file\n# params:\n#   path: {type: string, description: File to count, required: true}\n#   limit: {type: integer, description: Stop after, default: 100}\n# ---\nexec wc -l -- \"$ARG_PATH\"\n",
        true,
    );
    // 1b. executable with a sidecar that beats its header block
    write(
        &tools,
        "both",
        "#!/bin/sh\n# ---\n# description: from the header\n# ---\necho hi\n",
        true,
    );
    write(
        &tools,
        "both.yaml",
        "description: from the sidecar\n",
        false,
    );
    // 2. metadata-only command tool
    write(
        &tools,
        "greet.yaml",
        "description: Say hello\nparams:\n  who: {type: string, description: Whom, required: true}\ncommand: \"echo hello {who}\"\n",
        false,
    );
    // 3. interpreted script (not executable)
    write(
        &tools,
        "interp",
        "# ---\n# description: Run through sh\n# interpreter: sh\n# ---\necho interpreted\n",
        false,
    );
    // a darwin-only tool
    write(
        &tools,
        "mac_only.yaml",
        "description: Mac only\nvariants:\n  - platform: darwin\n    command: \"sw_vers\"\n",
        false,
    );
    // noise that must be ignored
    write(
        &tools,
        ".hidden.yaml",
        "description: hidden\ncommand: \"true\"\n",
        false,
    );
    write(
        &tools,
        "greet.yaml~",
        "description: backup\ncommand: \"true\"\n",
        false,
    );
    std::fs::create_dir(tools.join("subdir")).unwrap();
    // a malformed tool file
    write(
        &tools,
        "broken.yaml",
        "descripton: typo\ncommand: \"true\"\n",
        false,
    );
    let tools_arg = tools.to_str().unwrap().to_string();
    Launch::new()
        .cwd_dir(dir)
        .args(["--no-auth", "--tools", &tools_arg])
        .start()
}

fn tools_dir(srv: &Server) -> std::path::PathBuf {
    srv.cwd().join("tools")
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn all_lists_every_shape_sorted_skips_noise_and_names_bad_files_with_their_error() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    let all = c.json("all");
    assert_eq!(
        names(&all),
        ["both", "broken", "greet", "interp", "wc_lines"]
    );
    assert_eq!(
        all[4],
        json!({"name": "wc_lines", "description": "Count lines in a file"})
    );
    assert_eq!(all[0]["description"], "from the sidecar");
    let broken = &all[1];
    assert_eq!(broken["description"], "");
    let error = broken["error"].as_str().expect("the broken file's error");
    assert!(
        error.contains("broken.yaml") && error.contains("descripton"),
        "{error}"
    );
    assert!(
        srv.log_text().contains("broken.yaml"),
        "bad file not logged"
    );
}

/// `toolsrv all` shows a broken tool file's error in its row, in place of a
/// description; `--json` prints the file's JSON as the server sent it.
#[test]
fn the_all_command_shows_a_broken_tool_files_error() {
    let srv = server_with_tools();
    let out = crate::util::cli(&srv.socket)
        .arg("all")
        .output()
        .expect("run the client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("broken "))
        .unwrap_or_else(|| panic!("no row for the broken file:\n{text}"));
    assert!(
        row.contains("error: ") && row.contains("broken.yaml"),
        "{row}"
    );
    let out = crate::util::cli(&srv.socket)
        .args(["--json", "all"])
        .output()
        .expect("run the client");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(all[1]["name"], "broken");
    assert!(all[1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("broken.yaml")));
}

#[test]
fn a_tool_added_while_running_shows_up() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    assert!(!names(&c.json("all")).contains(&"late".to_string()));
    write(
        &tools_dir(&srv),
        "late.yaml",
        "description: Late\ncommand: \"true\"\n",
        false,
    );
    assert!(names(&c.json("all")).contains(&"late".to_string()));
}

#[test]
fn load_and_tools_json_shape() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    c.write("ctl", "load a1 wc_lines\nload a1 greet\n").unwrap();
    let tools: serde_json::Value = serde_json::from_str(&c.ask("tools", "a1\n").unwrap()).unwrap();
    assert_eq!(names(&tools), ["greet", "wc_lines"]);
    assert_eq!(
        tools[1],
        json!({
            "name": "wc_lines",
            "description": "Count lines in a file",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to count"},
                    "limit": {"type": "integer", "description": "Stop after", "default": 100}
                },
                "required": ["path"]
            }
        })
    );
    c.write("ctl", "load a1 interp\nload a1 both").unwrap();
    let tools: serde_json::Value = serde_json::from_str(&c.ask("tools", "a1").unwrap()).unwrap();
    assert_eq!(names(&tools), ["both", "greet", "interp", "wc_lines"]);
    assert_eq!(tools[0]["description"], "from the sidecar");
}

#[test]
fn revisions_count_successful_loads_and_unloads_only() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    assert_eq!(c.ask("tools_rev", "fresh\n").unwrap(), "0");
    c.write("ctl", "load a1 greet").unwrap();
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "1");
    c.write("ctl", "load a1 greet").unwrap(); // reload counts
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "2");
    c.write("ctl", "load a1 nope").unwrap_err();
    c.write("ctl", "unload a1 wc_lines").unwrap_err();
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "2");
    c.write("ctl", "unload a1 greet").unwrap();
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "3");
    assert_eq!(c.ask("tools", "a1").unwrap(), "[]");
}

#[test]
fn error_messages_word_for_word() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    let long = format!("load {} greet", "a".repeat(129));
    let bad_agent = format!("invalid agent ID: {}", toolsrv_protocol::AGENT_ID_RULE);
    let bad_tool = format!("invalid tool name: {}", toolsrv_protocol::TOOL_NAME_RULE);
    for (command, error) in [
        ("load a1 grpe", "unknown tool \"grpe\""),
        (
            "unload a1 greet",
            "tool \"greet\" is not loaded for agent \"a1\"",
        ),
        ("load a/b greet", bad_agent.as_str()),
        ("load a1 gr$et", bad_tool.as_str()),
        (long.as_str(), bad_agent.as_str()),
    ] {
        assert_eq!(c.write("ctl", command).unwrap_err(), error, "{command}");
    }
    assert_eq!(c.ask("tools", "").unwrap_err(), "write an agent ID first");
    assert_eq!(
        c.ask("tools_rev", "").unwrap_err(),
        "write an agent ID first"
    );
    assert_eq!(c.ask("tools", "bad agent").unwrap_err(), bad_agent);
    assert_eq!(
        c.write("ctl", "load a1 mac_only").unwrap_err(),
        "tool \"mac_only\" has no variant for linux/amd64"
    );
    let e = c.write("ctl", "frobnicate a1 greet").unwrap_err();
    assert!(e.contains("frobnicate"), "{e}");
    let e = c.write("ctl", "load broken").unwrap_err();
    assert!(e.contains("usage"), "{e}");
    let e = c.write("ctl", "load a1 broken").unwrap_err();
    assert!(e.contains("broken.yaml") && e.contains("descripton"), "{e}");
}

#[test]
fn several_ctl_commands_apply_in_order_and_stop_at_the_first_bad_one() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    let e = c
        .write("ctl", "load a1 greet\nload a1 nope\nload a1 interp\n")
        .unwrap_err();
    assert_eq!(e, "unknown tool \"nope\"");
    let tools: serde_json::Value = serde_json::from_str(&c.ask("tools", "a1").unwrap()).unwrap();
    assert_eq!(names(&tools), ["greet"]);
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "1");
}

#[test]
fn agents_have_independent_registries() {
    let srv = server_with_tools();
    let mut c = srv.attached();
    c.write("ctl", "load a1 greet").unwrap();
    c.write("ctl", "load a2 interp").unwrap();
    c.write("ctl", "load a2 both").unwrap();
    let t1: serde_json::Value = serde_json::from_str(&c.ask("tools", "a1").unwrap()).unwrap();
    let t2: serde_json::Value = serde_json::from_str(&c.ask("tools", "a2").unwrap()).unwrap();
    assert_eq!(names(&t1), ["greet"]);
    assert_eq!(names(&t2), ["both", "interp"]);
    assert_eq!(c.ask("tools_rev", "a1").unwrap(), "1");
    assert_eq!(c.ask("tools_rev", "a2").unwrap(), "2");
}

#[test]
fn the_builtin_tools_are_served_when_the_tools_dir_is_missing() {
    let srv = Server::start(&["--no-auth"]);
    let mut c: Raw = srv.attached();
    let all = c.json("all");
    let n = names(&all);
    for t in [
        "file_edit",
        "file_glob",
        "file_grep",
        "file_read",
        "file_write",
        "shell",
    ] {
        assert!(n.contains(&t.to_string()), "{t} missing from {n:?}");
    }
    for t in all.as_array().unwrap() {
        assert!(!t["description"].as_str().unwrap().is_empty(), "{t}");
    }
    c.write("ctl", "load a1 shell").unwrap();
    let tools: serde_json::Value = serde_json::from_str(&c.ask("tools", "a1").unwrap()).unwrap();
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["command"]));
    assert!(srv.log_text().contains("built-in tool set"));
}

#[test]
fn init_writes_the_builtins_without_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(toolsrv_bin())
        .args(["init", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("sandbox.yaml"), "{listed}");
    assert!(listed.contains("shell"), "{listed}");
    let policy = dir.path().join("sandbox.yaml");
    std::fs::write(&policy, "# mine\n").unwrap();
    let out = std::process::Command::new(toolsrv_bin())
        .args(["init", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), "# mine\n");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing written"));
}

/// Issue 23, hole 6: a file `toolsrv init` did not write is kept, but never
/// silently: a changed policy, a tool that is not a built-in, and a symbolic
/// link where a built-in would go are each reported on standard error.
#[test]
fn init_reports_the_files_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(dir.path().join("sandbox.yaml"), "# planted\n").unwrap();
    std::fs::write(tools.join("evil"), "#!/bin/sh\n# planted\n").unwrap();
    std::os::unix::fs::symlink("/bin/sh", tools.join("shell")).unwrap();
    let out = std::process::Command::new(toolsrv_bin())
        .args(["init", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "kept {}",
            dir.path().join("sandbox.yaml").display()
        )) && err.contains("differs from the built-in policy"),
        "{err}"
    );
    assert!(
        err.contains(&format!("found {}", tools.join("evil").display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "kept {}: a symbolic link",
            tools.join("shell").display()
        )),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sandbox.yaml")).unwrap(),
        "# planted\n"
    );
    // What init wrote itself is not reported the next time.
    let again = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let out = std::process::Command::new(toolsrv_bin())
            .args(["init", "--dir"])
            .arg(again.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{out:?}");
    }
}
