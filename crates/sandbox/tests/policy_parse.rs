//! Parsing of `sandbox.yaml`: every section, defaults, and errors with file and line.

use std::path::Path;
use toolsrv_sandbox::{Policy, PolicyError, DEFAULT_POLICY};

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::parse(text, Path::new("/x/sandbox.yaml"))
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(p) => panic!("expected an error, parsed {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_section_parses() {
    let text = r#"
general:
  best_effort: false
  log_level: warn
filesystem:
  ro: [/etc]
  rox: [/usr, "{HOME}/bin"]
  rw: ["{CWD}"]
  rwx: ["~/scratch"]
network:
  enabled: false
  bind_tcp: [8080]
  connect_tcp: [443, 80]
env: [PATH, HOME]
advanced:
  ldd: true
  add_exec: true
validation:
  deny: ['^git\s+push', 'curl']
"#;
    let p = parse(text).expect("parses");
    assert!(!p.general.best_effort);
    assert_eq!(p.general.log_level.as_deref(), Some("warn"));
    assert_eq!(p.filesystem.ro, ["/etc"]);
    assert_eq!(p.filesystem.rox, ["/usr", "{HOME}/bin"]);
    assert_eq!(p.filesystem.rw, ["{CWD}"]);
    assert_eq!(p.filesystem.rwx, ["~/scratch"]);
    assert!(!p.network.enabled);
    assert_eq!(p.network.bind_tcp, [8080]);
    assert_eq!(p.network.connect_tcp, [443, 80]);
    assert_eq!(p.env, ["PATH", "HOME"]);
    assert!(p.advanced.ldd);
    assert!(p.advanced.add_exec);
    assert_eq!(p.validation.deny, [r"^git\s+push", "curl"]);
}

#[test]
fn missing_sections_and_keys_take_defaults() {
    for text in [
        "",
        "# only a comment\n",
        "general:\n",
        "general: {}\nnetwork:\n  bind_tcp:\n",
    ] {
        let p = parse(text).expect("parses");
        assert!(p.general.best_effort, "{text:?}");
        assert_eq!(p.general.log_level, None);
        assert!(p.filesystem.ro.is_empty() && p.filesystem.rwx.is_empty());
        assert!(p.network.enabled);
        assert!(p.network.bind_tcp.is_empty() && p.network.connect_tcp.is_empty());
        assert!(p.env.is_empty());
        assert!(!p.advanced.ldd && !p.advanced.add_exec);
        assert!(p.validation.deny.is_empty());
    }
    let p = parse("general:\n  log_level: \"\"\n").expect("parses");
    assert_eq!(p.general.log_level, None);
}

#[test]
fn unknown_key_names_file_line_and_alternatives() {
    let msg = err("general:\n  best_effort: true\nfilesystem:\n  rwxx: [/]\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:4: unknown field \"rwxx\", expected one of"),
        "{msg}"
    );
    assert!(msg.contains("\"rwx\""), "{msg}");
    let msg = err("netwrk:\n  enabled: true\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:1: unknown field \"netwrk\""),
        "{msg}"
    );
}

#[test]
fn bad_yaml_names_the_line() {
    let msg = err("general:\n  best_effort: true\nfilesystem:\n  ro: [/etc\n  rw: x: y\n");
    assert!(msg.starts_with("/x/sandbox.yaml:"), "{msg}");
    assert!(!msg.contains("at line"), "{msg}");
    let msg = err("network:\n  enabled: maybe\n");
    assert!(msg.starts_with("/x/sandbox.yaml:2: invalid type"), "{msg}");
}

#[test]
fn bad_ports_are_refused_with_the_value() {
    let msg = err("network:\n  bind_tcp: [80, 0]\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:2: invalid port 0"),
        "{msg}"
    );
    let msg = err("network:\n  enabled: true\n  connect_tcp:\n    - 443\n    - 70000\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:5: invalid port 70000"),
        "{msg}"
    );
    let msg = err("network:\n  connect_tcp: [-1]\n");
    assert!(msg.contains("invalid port -1"), "{msg}");
}

#[test]
fn domains_and_hosts_parse_and_bad_ones_name_the_value_and_line() {
    let p = Policy::parse(
        "network:\n  domains: [pypi.org, \"*.pythonhosted.org\", \"github.com:22\"]\n  hosts: {registry.internal: 10.0.0.5, two.test: [\"::1\", 127.0.0.1]}\n",
        Path::new("/x/sandbox.yaml"),
    )
    .expect("valid");
    assert_eq!(p.network.domains.len(), 3);
    assert_eq!(p.network.hosts.len(), 2);
    let allow = p.network.allowlist().expect("an allowlist");
    assert_eq!(allow.ports(), vec![22, 80, 443]);
    assert!(Policy::default().network.allowlist().is_none());
    let msg = err("network:\n  domains:\n    - pypi.org\n    - \"exa mple.com\"\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:4: network.domains: \"exa mple.com\" is not a host name"),
        "{msg}"
    );
    let msg = err("network:\n  domains: [\"pypi.org:https\"]\n");
    assert!(msg.contains("the port is not a number"), "{msg}");
    let msg = err("network:\n  hosts: {up.test: not-an-address}\n");
    assert!(
        msg.contains(
            "network.hosts: \"up.test\" maps to \"not-an-address\", which is not an IP address"
        ),
        "{msg}"
    );
    let msg = err("network:\n  hosts: {\"bad name\": 10.0.0.1}\n");
    assert!(msg.contains("\"bad name\" is not a host name"), "{msg}");
    let msg = err("network:\n  enabled: false\n  domains: [pypi.org]\n");
    assert!(
        msg.starts_with(
            "/x/sandbox.yaml:3: network.domains lists hosts, but network.enabled is false"
        ),
        "{msg}"
    );
}

#[test]
fn bad_regex_names_the_pattern() {
    let msg = err("validation:\n  deny:\n    - 'ok'\n    - 'rm (-rf'\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:4: invalid deny pattern \"rm (-rf\""),
        "{msg}"
    );
}

#[test]
fn bad_log_level_is_refused() {
    let msg = err("general:\n  log_level: verbose\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:2: invalid log_level \"verbose\": expected one of debug, info, warn, error"),
        "{msg}"
    );
}

#[test]
fn relative_paths_and_bad_variables_are_refused() {
    let msg = err("filesystem:\n  ro: [build]\n");
    assert!(
        msg.starts_with("/x/sandbox.yaml:2: relative path \"build\""),
        "{msg}"
    );
    let msg = err("filesystem:\n  ro: [\"{HOME/x\"]\n");
    assert!(msg.contains("unclosed"), "{msg}");
    let msg = err("env: [PATH, 'BAD-NAME']\n");
    assert!(
        msg.contains("invalid environment variable name \"BAD-NAME\""),
        "{msg}"
    );
}

#[test]
fn default_policy_parses_and_is_default_deny() {
    let p = Policy::parse(DEFAULT_POLICY, Path::new("default")).expect("default parses");
    assert!(p.network.enabled);
    assert!(p.advanced.add_exec);
    assert!(!p.advanced.ldd);
    assert_eq!(
        p.env[..10],
        ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ", "TMPDIR"]
    );
    // Network configuration passes through (issue 28 item 5) ...
    for name in [
        "HTTP_PROXY",
        "https_proxy",
        "NO_PROXY",
        "ALL_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_TRUSTED_HOST",
        "npm_config_registry",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "PYENV_ROOT",
    ] {
        assert!(
            p.env.iter().any(|e| e == name),
            "{name} is not passed through"
        );
    }
    // ... credentials never do.
    for e in &p.env {
        let upper = e.to_ascii_uppercase();
        for word in ["TOKEN", "SECRET", "PASSWORD", "KEY", "AUTH", "SSH_", "AWS_"] {
            assert!(!upper.contains(word), "{e} looks like a credential");
        }
    }
    let writable: Vec<&String> = p.filesystem.rw.iter().chain(&p.filesystem.rwx).collect();
    for forbidden in ["/", "~", "{HOME}", "/tmp", "{TMPDIR}", "/etc", "/usr"] {
        assert!(
            !writable.iter().any(|w| w.as_str() == forbidden),
            "{forbidden} is writable in the default policy"
        );
    }
    assert!(p.filesystem.ro.iter().any(|x| x == "/etc"));
    for dir in ["/usr", "/bin", "/sbin", "/lib", "/lib64"] {
        assert!(p.filesystem.rox.iter().any(|x| x == dir), "{dir}");
    }
    // The workspace, not the request's directory: a call from `src/` still
    // reaches the project's root and its `.git`.
    assert!(p.filesystem.rwx.iter().any(|w| w.as_str() == "{WORKSPACE}"));
    // Home directories are granted piecemeal, never as a whole.
    let fs = &p.filesystem;
    let granted: Vec<&String> = fs
        .ro
        .iter()
        .chain(&fs.rox)
        .chain(&fs.rw)
        .chain(&fs.rwx)
        .collect();
    for dir in [
        "~",
        "{HOME}",
        "~/.config",
        "{XDG_CONFIG_HOME}",
        "{XDG_CACHE_HOME}",
    ] {
        assert!(
            !granted.iter().any(|g| g.as_str() == dir),
            "{dir} is granted whole"
        );
    }
    assert!(p.filesystem.rw.iter().any(|x| x == "/dev/null"));
    // Every non-blank line of the file carries a comment for users.
    for line in DEFAULT_POLICY.lines().filter(|l| !l.trim().is_empty()) {
        assert!(line.contains('#'), "uncommented line: {line}");
    }
}

/// The built-in policy's commented `domains:` and `secrets:` examples
/// parse once uncommented as their comment says.
#[test]
fn the_built_in_policys_domains_and_secrets_examples_parse_uncommented() {
    let mut out = Vec::new();
    for line in DEFAULT_POLICY.lines() {
        if line.starts_with("  domains: []") {
            continue;
        }
        if line.starts_with("secrets: []") {
            out.push("secrets:".to_string());
            continue;
        }
        match line.strip_prefix("  # ") {
            Some(rest)
                if rest.starts_with("domains:")
                    || rest.starts_with("  - ")
                    || rest.starts_with("- env:")
                    || rest.starts_with("  from:")
                    || rest.starts_with("  hosts:")
                    || rest.starts_with("  plaintext:") =>
            {
                out.push(format!("  {rest}"))
            }
            _ => out.push(line.to_string()),
        }
    }
    let text = out.join("\n");
    let p = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(
        p.network.domains.contains(&"github.com:22".to_string()),
        "{:?}",
        p.network.domains
    );
    assert_eq!(p.network.domains.len(), 11);
    assert_eq!(p.secrets.len(), 1);
    assert_eq!(p.secrets[0].hosts, vec!["api.github.com", "github.com"]);
}
