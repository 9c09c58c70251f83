//! docs/cli.md, first paragraph: `toolsrv doctor` says what this host and a
//! running server enforce, what is missing and what to change, and exits 0
//! only when everything the policy asks for is enforced.
//!
//! The facts asserted are this project's machines': root, Landlock, seccomp,
//! writable cgroups.

use std::path::Path;
use std::process::Output;

use crate::util::{cli, toolsrv_bin, Launch, Server};

/// A policy asking for everything to be enforced, with `limits` (YAML lines
/// under `limits:`).
fn strict_policy(dir: &Path, limits: &str) -> std::path::PathBuf {
    let p = dir.join("strict.yaml");
    std::fs::write(
        &p,
        format!(
            "general:\n  best_effort: false\nfilesystem:\n  rox: [/usr, /bin, /lib]\n  rwx: [\"{{CWD}}\"]\nlimits:\n{limits}\n"
        ),
    )
    .expect("write the policy");
    p
}

/// `toolsrv doctor <args>` with `env` added; bounded by the command itself
/// (it probes in a child process it waits for, and reads one file).
fn doctor(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new(toolsrv_bin());
    cmd.arg("doctor")
        .args(args)
        .env_remove("TOOLSRV_SOCKET")
        .env_remove("TOOLSRV_CONTAINMENT")
        .env_remove("TOOLSRV_USERNS")
        .env_remove("TOOLSRV_VIEW")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run toolsrv doctor")
}

/// `toolsrv --json doctor` against the running `srv` (without the test's
/// `TOOLSRV_CONTAINMENT`).
fn doctor_of_output(srv: &Server) -> Output {
    cli(&srv.socket)
        .args(["--json", "doctor"])
        .env_remove("TOOLSRV_CONTAINMENT")
        .output()
        .expect("run toolsrv doctor")
}

/// [`doctor_of_output`]'s JSON.
fn doctor_of(srv: &Server) -> serde_json::Value {
    json(&doctor_of_output(srv))
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn doctor_describes_this_host_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let policy = strict_policy(dir.path(), "  processes: 100");
    let policy = policy.to_str().unwrap();

    let out = doctor(&["--json", "--sandbox", policy], &[]);
    let v = json(&out);
    let host = &v["host"];
    assert_eq!(host["source"], "host");
    assert!(host["landlock"]["abi"].as_i64().unwrap() >= 1, "{host}");
    assert_eq!(host["landlock"]["filesystem"], true);
    assert_eq!(host["seccomp"]["available"], true, "{host}");
    assert_eq!(host["containment"]["mechanism"], "cgroup", "{host}");
    assert!(host["containment"]["processes"].is_string(), "{host}");
    // A root server's tools run in their own user namespace, as unprivileged
    // host ids; the test's directory (the workspace a server started here
    // would have) takes the id-mapped mounts of their writable rules.
    assert_eq!(host["identity"]["mode"], "root-tools-user-namespace");
    assert_eq!(host["identity"]["uid"], 0);
    let tools = &host["identity"]["tools"];
    assert!(tools["host_uid"].as_u64().unwrap() >= 65_536, "{host}");
    assert_eq!(tools["host_gid"], tools["host_uid"], "{host}");
    assert_eq!(tools["count"], 65_536, "{host}");
    assert_eq!(tools["workspace_id_maps"]["available"], true, "{host}");
    assert_eq!(host["filesystem"]["mechanism"], "mount-namespace-view");
    assert_eq!(host["policy"]["path"], policy);
    assert_eq!(host["policy"]["best_effort"], false);
    assert!(
        host["network"]["domains"]
            .as_str()
            .is_some_and(|d| d.starts_with("network namespace per run")),
        "{host}"
    );
    assert_eq!(
        host["attribution"]["mechanism"], "tools-pid-namespace",
        "{host}"
    );
    assert!(host["missing"].is_array());
    assert!(v["server"].is_null(), "no --socket, no server report");
    let required: Vec<&serde_json::Value> = host["missing"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["required"] == true)
        .collect();
    assert_eq!(v["enforced"], required.is_empty());
    assert_eq!(
        out.status.code(),
        Some(if required.is_empty() { 0 } else { 1 })
    );

    let out = doctor(&["--sandbox", policy], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "this host (probed now)",
        "landlock      ABI ",
        "seccomp       available",
        "containment   cgroup:",
        "identity      root-tools-user-namespace (uid 0, gid 0)",
        "confined tools: uid ",
        "filesystem    mount-namespace-view",
        "network       ",
        "denials       ",
        "attribution   tools-pid-namespace: ",
        "missing       ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

#[test]
fn doctor_exits_1_when_the_policy_asks_for_what_the_host_does_not_enforce() {
    let dir = tempfile::tempdir().unwrap();
    // A strict policy this host enforces whole: exit 0.
    let enforced = strict_policy(dir.path(), "  processes: 100");
    let out = doctor(&["--sandbox", enforced.to_str().unwrap()], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // No containment at all (forced, as a server would be): exit 1, naming
    // what is missing and what to change.
    let out = doctor(
        &["--json", "--sandbox", enforced.to_str().unwrap()],
        &[("TOOLSRV_CONTAINMENT", "none")],
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["enforced"], false);
    let missing = v["host"]["missing"].as_array().unwrap();
    assert!(
        missing.iter().any(|m| m["required"] == true
            && m["what"].as_str().unwrap().starts_with("containment")
            && m["fix"].as_str().unwrap().contains("Delegate=yes")),
        "{missing:?}"
    );

    // A memory limit where only PID namespaces contain runs: no memory
    // controller enforces it.
    let memory = dir.path().join("memory.yaml");
    std::fs::write(
        &memory,
        "general:\n  best_effort: false\nlimits:\n  processes: 0\n  memory: 1GiB\n",
    )
    .unwrap();
    let out = doctor(
        &["--json", "--sandbox", memory.to_str().unwrap()],
        &[("TOOLSRV_CONTAINMENT", "pidns")],
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert!(
        v["host"]["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["what"].as_str().unwrap().starts_with("limits.memory")),
        "{v}"
    );
}

/// `TOOLSRV_VIEW=off` makes a server fall back to carving, and doctor, which
/// reads the same variables and decides by the same rules, says so (it
/// ignored the variable); an unknown `TOOLSRV_CONTAINMENT` is detected as
/// `auto` by both, cgroups here (a server skipped cgroups for it and used
/// a PID namespace per run, while the doctor said cgroups).
#[test]
fn doctor_decides_from_the_forcing_variables_as_start_up_does() {
    let plain = json(&doctor(&["--json"], &[]));
    assert_eq!(
        plain["host"]["filesystem"]["mechanism"], "mount-namespace-view",
        "{plain}"
    );
    let v = json(&doctor(&["--json"], &[("TOOLSRV_VIEW", "off")]));
    let fs = &v["host"]["filesystem"];
    assert_eq!(fs["mechanism"], "landlock-only-fallback", "{v}");
    assert_eq!(fs["detail"], "TOOLSRV_VIEW=off", "{v}");
    let unknown = json(&doctor(&["--json"], &[("TOOLSRV_CONTAINMENT", "cgroups")]));
    assert_eq!(
        unknown["host"]["containment"]["mechanism"], "cgroup",
        "{unknown}"
    );
    let srv = Launch::new()
        .arg("--no-auth")
        .env("TOOLSRV_CONTAINMENT", "cgroups")
        .env("TOOLSRV_VIEW", "off")
        .start();
    let server = &doctor_of(&srv)["server"];
    assert_eq!(server["containment"]["mechanism"], "cgroup", "{server}");
    assert_eq!(
        server["filesystem"]["mechanism"], "landlock-only-fallback",
        "{server}"
    );
}

/// With `TOOLSRV_USERNS=root` a root server's tools run as root (the
/// behaviour before issue 33): doctor says so, and that it is missing.
#[test]
fn doctor_says_when_a_root_servers_tools_run_as_root() {
    let out = doctor(&["--json"], &[("TOOLSRV_USERNS", "root")]);
    let v = json(&out);
    let id = &v["host"]["identity"];
    assert_eq!(id["mode"], "root", "{v}");
    assert_eq!(id["reason"], "TOOLSRV_USERNS=root", "{v}");
    assert!(id["tools"].is_null(), "{v}");
    assert!(
        v["host"]["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["required"] == true
                && m["what"]
                    .as_str()
                    .unwrap()
                    .starts_with("unprivileged tools")),
        "{v}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn doctor_with_a_socket_shows_what_the_running_server_enforces() {
    let srv = Launch::new()
        .arg("--no-auth")
        .env("TOOLSRV_CONTAINMENT", "pidns")
        .start();
    let out = doctor_of_output(&srv);
    let v = json(&out);
    let server = &v["server"];
    assert_eq!(server["source"], "server", "{v}");
    assert_eq!(
        server["containment"]["mechanism"], "pid-namespace",
        "{server}"
    );
    assert_eq!(server["identity"]["mode"], "root-tools-user-namespace");
    assert!(server["identity"]["tools"]["host_uid"].is_u64(), "{server}");
    assert!(server["landlock"]["abi"].as_i64().unwrap() >= 1);
    // The host, probed without the variable, has cgroups.
    assert_eq!(v["host"]["containment"]["mechanism"], "cgroup");
    // The server's report decides the exit status.
    assert_eq!(v["enforced"], server["enforced"]);
    let code = if server["enforced"] == true { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(code), "{v}");

    let out = cli(&srv.socket)
        .arg("doctor")
        .env_remove("TOOLSRV_CONTAINMENT")
        .output()
        .expect("run toolsrv doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the server (as the server reports it)")
            && text.contains("containment   pid-namespace:"),
        "{text}"
    );
}

#[test]
fn the_server_reports_a_landlock_abi_limit_and_its_own_file_reads_as_json() {
    // The server's own view: --landlock-abi-limit lowers what it enforces,
    // and the report says what that costs.
    let srv = Launch::new()
        .args(["--no-auth", "--landlock-abi-limit", "3"])
        .start();
    let mut c = srv.attached();
    let v: serde_json::Value = serde_json::from_slice(&c.read_file("doctor")).unwrap();
    assert_eq!(v["landlock"]["abi"], 3);
    assert_eq!(v["landlock"]["tcp_ports"], false);
    assert_eq!(v["denials"]["observable"], false);
    assert!(
        v["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["what"] == "Landlock device ioctl control" && m["required"] == true),
        "{v}"
    );
    assert_eq!(v["enforced"], false);
}

/// The network line says what this policy lets tools reach: the built-in
/// policy (the network), `enabled: false` (none, enforced by seccomp), port
/// rules (those ports, enforced by Landlock).
#[test]
fn the_network_line_says_what_the_policy_lets_tools_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = |args: &[&str]| String::from_utf8_lossy(&doctor(args, &[]).stdout).into_owned();
    let builtin = text(&[]);
    assert!(
        builtin.contains("  network       this policy lets tools reach the network (network.enabled: true): connect to any TCP port, bind any TCP port\n"),
        "{builtin}"
    );
    let off = dir.path().join("off.yaml");
    std::fs::write(&off, "network:\n  enabled: false\n").expect("write");
    let out = text(&["--sandbox", off.to_str().expect("utf-8")]);
    assert!(
        out.contains("  network       this policy lets tools reach no network (network.enabled: false: no TCP, UDP, raw or MPTCP socket, loopback included), enforced by seccomp\n"),
        "{out}"
    );
    let ports = dir.path().join("ports.yaml");
    std::fs::write(&ports, "network:\n  connect_tcp: [443, 80]\n").expect("write");
    let out = text(&["--sandbox", ports.to_str().expect("utf-8")]);
    assert!(
        out.contains("this policy lets tools reach the network (network.enabled: true): connect to TCP ports 443, 80 only, bind any TCP port, enforced by Landlock\n"),
        "{out}"
    );
}

/// A policy file edited into one that does not parse: the server keeps the
/// version it loaded, and doctor says so, with the file, line and reason and
/// when that version was loaded; it does not say everything is enforced.
#[test]
fn a_policy_file_that_no_longer_parses_is_reported_with_the_version_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sandbox.yaml");
    std::fs::write(&file, "filesystem:\n  ro: [/usr]\n").expect("write");
    let srv = Launch::new()
        .arg("--no-auth")
        .arg("--sandbox")
        .arg(&file)
        .start();
    std::fs::write(
        &file,
        "filesystem:\n  ro: [/usr]\nnetwork:\n  enabled: true\nfilesystem:\n  rw: [/]\n",
    )
    .expect("break the policy");
    let out = cli(&srv.socket)
        .args(["doctor", "--sandbox"])
        .arg(&file)
        .output()
        .expect("run toolsrv doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let f = file.display();
    assert!(
        text.contains(&format!("missing       the policy file does not parse: {f}:5: duplicate field \"filesystem\"; the server uses the version loaded at ")),
        "{text}"
    );
    assert!(
        text.contains(&format!("missing       the policy file does not parse: {f}:5: duplicate field \"filesystem\"; a server started with it refuses to start")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("NOT everything the policy asks for is enforced")),
        "{text}"
    );
    // The time is the load before the edit, as RFC 3339.
    let v = json(
        &cli(&srv.socket)
            .args(["--json", "doctor"])
            .output()
            .expect("doctor"),
    );
    let what = v["server"]["missing"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .filter_map(|m| m["what"].as_str())
                .find(|w| w.contains("loaded at"))
        })
        .unwrap_or_default()
        .to_string();
    let at = what.rsplit("loaded at ").next().unwrap_or_default();
    assert!(at.len() == 24 && at.ends_with('Z'), "{what}: {v}");
}
