//! Parsing the three tool shapes, metadata errors and variants.

use std::time::Duration;

use crate::common::{exe, linux, plain};
use serde_json::json;
use toolsrv_metadata::{Catalog, Host, MetaError, OutputMode, ToolKind};

#[test]
fn executable_with_header_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = exe(
        dir.path(),
        "wc_lines",
        "#!/bin/sh\n# ---\n# description: Count lines in a file\n# params:\n#   path: {type: string, description: File to count, required: true}\n#   limit: {type: integer, default: 100}\n# timeout: 30s\n# output: auto\n# ---\nexec wc -l -- \"$ARG_PATH\"\n",
    );
    let tool = linux(dir.path()).resolve("wc_lines").expect("resolve");
    assert_eq!(tool.name, "wc_lines");
    assert_eq!(tool.description, "Count lines in a file");
    assert_eq!(
        tool.input_schema,
        json!({"type": "object",
               "properties": {"path": {"type": "string", "description": "File to count"},
                              "limit": {"type": "integer", "default": 100}},
               "required": ["path"]})
    );
    assert_eq!(tool.param_order, vec!["path", "limit"]);
    assert_eq!(
        tool.kind,
        ToolKind::Executable {
            program: path.clone()
        }
    );
    assert_eq!(tool.timeout, Some(Duration::from_secs(30)));
    assert_eq!(tool.output, OutputMode::Auto);
    assert_eq!(tool.source, path);
    assert_eq!(tool.info().input_schema, tool.input_schema);
    assert_eq!(tool.summary().description, "Count lines in a file");
}

#[test]
fn executable_without_metadata_is_a_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(dir.path(), "bare", "#!/bin/sh\necho hi\n");
    let tool = linux(dir.path()).resolve("bare").expect("resolve");
    assert_eq!(tool.description, "");
    assert_eq!(
        tool.input_schema,
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn other_comment_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(
        dir.path(),
        "js",
        "#!/usr/bin/env node\n// ---\n// description: js tool\n// ---\n",
    );
    exe(
        dir.path(),
        "lua",
        "#!/usr/bin/env lua\n-- ---\n-- description: lua tool\n-- ---\n",
    );
    let cat = linux(dir.path());
    assert_eq!(cat.resolve("js").expect("js").description, "js tool");
    assert_eq!(cat.resolve("lua").expect("lua").description, "lua tool");
}

#[test]
fn metadata_only_command_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = plain(
        dir.path(),
        "greet.yaml",
        "name: greet\ndescription: Say hello\nparams:\n  who: {type: string, required: true}\ncommand: \"echo hello {who}\"\ntimeout: 5\noutput: text\n",
    );
    let tool = linux(dir.path()).resolve("greet").expect("resolve");
    let ToolKind::Command { template } = &tool.kind else {
        panic!("not a command tool: {:?}", tool.kind);
    };
    assert_eq!(template.source(), "echo hello {who}");
    assert_eq!(tool.timeout, Some(Duration::from_secs(5)));
    assert_eq!(tool.source, yaml);
}

#[test]
fn interpreted_script() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = plain(
        dir.path(),
        "hello.py",
        "# ---\n# description: py\n# interpreter: python3\n# ---\nprint('hi')\n",
    );
    let tool = linux(dir.path()).resolve("hello.py").expect("resolve");
    assert_eq!(
        tool.kind,
        ToolKind::Interpreted {
            interpreter: "python3".into(),
            script
        }
    );
}

#[test]
fn non_executable_file_without_interpreter_is_not_a_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(dir.path(), "README", "# notes\n");
    let cat = linux(dir.path());
    assert!(cat.all().is_empty());
    assert_eq!(
        cat.resolve("README").expect_err("not a tool").to_string(),
        "unknown tool \"README\""
    );
}

#[test]
fn executable_key_overrides_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(dir.path(), "rel.yaml", "executable: bin/real\n");
    plain(dir.path(), "abs.yaml", "executable: /usr/bin/env\n");
    plain(dir.path(), "bare.yaml", "executable: env\n");
    let cat = linux(dir.path());
    let program = |name: &str| match cat.resolve(name).expect(name).kind {
        ToolKind::Executable { program } => program,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(program("rel"), dir.path().join("bin/real"));
    assert_eq!(program("abs"), std::path::PathBuf::from("/usr/bin/env"));
    assert_eq!(program("bare"), std::path::PathBuf::from("env"));
}

#[test]
fn sidecar_wins_over_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(
        dir.path(),
        "t",
        "#!/bin/sh\n# ---\n# description: from header\n# ---\n",
    );
    plain(dir.path(), "t.yaml", "description: from sidecar\n");
    let tool = linux(dir.path()).resolve("t").expect("resolve");
    assert_eq!(tool.description, "from sidecar");
    assert_eq!(tool.source, dir.path().join("t.yaml"));
}

#[test]
fn input_schema_wins_over_params() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "s.yaml",
        "params:\n  a: {type: string}\ninputSchema:\n  type: object\n  properties:\n    z: {type: integer}\n    b: {type: string}\n  additionalProperties: false\ncommand: echo {z} {b}\n",
    );
    let tool = linux(dir.path()).resolve("s").expect("resolve");
    assert_eq!(
        tool.input_schema,
        json!({"type": "object", "properties": {"z": {"type": "integer"}, "b": {"type": "string"}}, "additionalProperties": false})
    );
    assert_eq!(tool.param_order, vec!["z", "b"]);
}

fn err_of(file: &str, text: &str, script: bool) -> (String, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = if script {
        exe(dir.path(), file, text)
    } else {
        plain(dir.path(), file, text)
    };
    let name = file.trim_end_matches(".yaml");
    let cat = linux(dir.path());
    let e = cat.resolve(name).expect_err("bad metadata");
    // docs/protocol.md, "Namespace": `all` lists a bad tool file with its error.
    let all = cat.all();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].name, name);
    assert_eq!(all[0].error.as_deref(), Some(e.to_string().as_str()));
    (e.to_string(), path)
}

#[test]
fn unknown_key_names_file_line_and_field() {
    let (e, path) = err_of(
        "x.yaml",
        "description: d\ncommand: echo\ndescripton: typo\n",
        false,
    );
    assert!(
        e.starts_with(&format!(
            "{}:3: unknown field \"descripton\", expected one of ",
            path.display()
        )),
        "{e}"
    );
    assert!(!e.contains("column"), "{e}");
}

#[test]
fn header_errors_use_script_lines() {
    let (e, path) = err_of(
        "h",
        "#!/bin/sh\n# leading comment\n# ---\n# description: d\n# bogus: 1\n# ---\necho\n",
        true,
    );
    assert!(
        e.starts_with(&format!("{}:5: unknown field \"bogus\"", path.display())),
        "{e}"
    );
    let (e, path) = err_of(
        "h",
        "#!/bin/sh\n# ---\n# params:\n#   a: [unclosed\n# ---\n",
        true,
    );
    assert!(e.starts_with(&format!("{}:", path.display())), "{e}");
    let line: usize = e[path.display().to_string().len() + 1..]
        .split(':')
        .next()
        .and_then(|l| l.parse().ok())
        .expect("line number");
    assert!((4..=6).contains(&line), "{e}");
}

#[test]
fn bad_yaml_is_an_error() {
    let (e, path) = err_of("b.yaml", "description: [unclosed\ncommand: x\n", false);
    assert!(e.starts_with(&format!("{}:", path.display())), "{e}");
    let (e, _) = err_of("c.yaml", "- just\n- a list\n", false);
    assert!(e.contains("invalid type"), "{e}");
}

#[test]
fn bad_schema_is_an_error() {
    let (e, path) = err_of(
        "s.yaml",
        "command: x\ninputSchema:\n  type: string\n",
        false,
    );
    assert_eq!(
        e,
        format!(
            "{}:3: inputSchema: a JSON Schema object with \"type\": \"object\" is required",
            path.display()
        )
    );
    let (e, path) = err_of("s.yaml", "command: x\ninputSchema: [1, 2]\n", false);
    assert!(
        e.starts_with(&format!(
            "{}:2: inputSchema: invalid type: sequence, expected a JSON Schema object",
            path.display()
        )),
        "{e}"
    );
    let (e, _) = err_of(
        "p.yaml",
        "command: x\nparams:\n  a: {type: string, required: yes}\n",
        false,
    );
    assert!(
        e.contains("parameter \"a\": required must be true or false"),
        "{e}"
    );
}

#[test]
fn bad_values_are_errors() {
    let (e, path) = err_of("t.yaml", "command: x\ntimeout: soon\n", false);
    assert!(
        e.starts_with(&format!(
            "{}:2: timeout: invalid duration \"soon\"",
            path.display()
        )),
        "{e}"
    );
    let (e, _) = err_of("o.yaml", "command: x\noutput: picture\n", false);
    assert!(
        e.contains("unknown variant \"picture\", expected one of \"text\", \"image\", \"auto\""),
        "{e}"
    );
    let (e, path) = err_of("n.yaml", "name: other\ncommand: x\n", false);
    assert_eq!(
        e,
        format!(
            "{}: name \"other\" does not match the file name \"n\"",
            path.display()
        )
    );
    let (e, _) = err_of("m.yaml", "description: nothing to run\n", false);
    assert!(
        e.ends_with("a metadata-only tool needs a command or an executable"),
        "{e}"
    );
    let (e, _) = err_of("c.yaml", "command: x\nexecutable: y\n", false);
    assert!(
        e.ends_with("command and executable cannot be combined; a tool runs in exactly one way"),
        "{e}"
    );
}

#[test]
fn unknown_placeholder_is_an_error() {
    let (e, path) = err_of(
        "u.yaml",
        "params:\n  a: {type: string}\ncommand: echo {a} {b}\n",
        false,
    );
    assert_eq!(
        e,
        format!(
            "{}: command placeholder \"{{b}}\" is not a declared parameter",
            path.display()
        )
    );
}

#[test]
fn literal_braces_in_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "b.yaml",
        "params:\n  a: {type: string}\ncommand: \"echo {{a}} {a} }}\"\n",
    );
    let tool = linux(dir.path()).resolve("b").expect("resolve");
    let inv = tool
        .invocation(&crate::common::obj(json!({"a": "x y"})))
        .expect("invocation");
    assert_eq!(inv.argv[2], "echo {a} 'x y' }");
}

const VARIANTS: &str = "description: base\ncommand: echo base\nvariants:\n  - platform: darwin\n    command: echo mac\n  - platform: linux\n    arch: arm64\n    command: echo arm\n  - arch: amd64\n    description: any amd64\n    command: echo amd64\n";

#[test]
fn first_matching_variant_is_merged() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(dir.path(), "v.yaml", VARIANTS);
    let command = |host: Host| {
        let tool = Catalog::new(dir.path().to_path_buf(), host)
            .resolve("v")
            .expect("resolve");
        let ToolKind::Command { template } = tool.kind else {
            panic!("not a command")
        };
        (template.source().to_string(), tool.description)
    };
    assert_eq!(
        command(Host::new("darwin", "arm64")),
        ("echo mac".into(), "base".into())
    );
    assert_eq!(
        command(Host::new("linux", "arm64")),
        ("echo arm".into(), "base".into())
    );
    assert_eq!(
        command(Host::new("linux", "amd64")),
        ("echo amd64".into(), "any amd64".into())
    );
}

#[test]
fn variant_replaces_how_the_tool_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "w.yaml",
        "command: echo base\nvariants:\n  - platform: linux\n    executable: bin/w-linux\n",
    );
    let tool = linux(dir.path()).resolve("w").expect("resolve");
    assert_eq!(
        tool.kind,
        ToolKind::Executable {
            program: dir.path().join("bin/w-linux")
        }
    );
}

#[test]
fn tool_without_matching_variant_is_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "maconly.yaml",
        "description: mac\ncommand: open .\nvariants:\n  - platform: darwin\n",
    );
    plain(dir.path(), "other.yaml", "command: echo\n");
    let cat = linux(dir.path());
    let names: Vec<String> = cat.all().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["other"]);
    let e = cat.resolve("maconly").expect_err("no variant");
    assert_eq!(
        e,
        MetaError::NoVariant {
            name: "maconly".into(),
            platform: "linux".into(),
            arch: "amd64".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "tool \"maconly\" has no variant for linux/amd64"
    );
    let mac = Catalog::new(dir.path().to_path_buf(), Host::new("darwin", "arm64"));
    assert_eq!(mac.all().len(), 2);
}
