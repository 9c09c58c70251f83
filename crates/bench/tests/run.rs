//! The `toolsrv-bench` binary end to end: it starts the real server (the
//! `toolsrv` built next to it in the same target dir), measures, and reports.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn rtt_reports_every_figure_with_ratios_for_both_servers() {
    let stdout = bench(&["rtt", "--iters", "200"]);
    assert!(stdout.contains("cores: "), "{stdout}");
    assert_eq!(stdout.matches("== rtt: server").count(), 2, "{stdout}");
    assert!(stdout.contains("server --no-auth"), "{stdout}");
    assert!(stdout.contains("server auth"), "{stdout}");
    assert!(stdout.contains("200 iterations per figure"), "{stdout}");
    for name in [
        "raw-echo (server thread)",
        "9p-read-info (bare codec)",
        "9p-read-info (bare, clunk after)",
        "9p-tstat (one rpc)",
    ] {
        assert_eq!(stdout.matches(name).count(), 2, "{name}: {stdout}");
    }
    let goal_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("9p-read-info ") && l.contains("goal < 4x"))
        .collect();
    assert_eq!(goal_lines.len(), 2, "{stdout}");
    for l in goal_lines {
        assert!(
            l.contains("n=200") && l.contains("| baseline raw-echo median"),
            "{l}"
        );
    }
}

/// Run the bench with `args` against the server next to it; its stdout, after
/// checking it exited 0.
fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsrv-bench"))
        .args(args)
        .env("TOOLSRV_BIN", toolsrv_testkit::toolsrv_bin())
        .output()
        .expect("run toolsrv-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    stdout
}

/// The one line starting with `prefix`.
fn line_of<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(lines.len(), 1, "{prefix}: {stdout}");
    lines[0]
}

#[test]
fn discovery_reports_all_load_and_the_readdir_baseline() {
    let out = bench(&["discovery", "--iters", "20"]);
    assert!(
        out.contains("== discovery: 1000 tools in 1333 files"),
        "{out}"
    );
    assert!(line_of(&out, "readdir + stat (bench process)").contains("n=20"));
    let all = line_of(&out, "read all (warm)");
    assert!(
        all.contains("| baseline readdir + stat (bench process) median")
            && all.contains("(goal < 20.00 ms: "),
        "{all}"
    );
    assert!(line_of(&out, "read all (cold: files changed)").contains("n=10"));
    assert!(line_of(&out, "ctl load of one tool").contains("ratio "));
}

#[test]
fn call_reports_round_trips_throughput_and_streaming() {
    let out = bench(&["call", "--iters", "32", "--stream-size", "8MiB"]);
    // The sandboxed call has two 1.15x goals (vs --yolo, vs the same call
    // without containment) and a 1.3x goal vs the bare spawn.
    for (prefix, goal, count) in [
        ("call true_sh (--yolo)", "(goal <= 1.3x: ", 1),
        ("call true_sh (sandboxed)", "(goal <= 1.15x: ", 2),
        ("call true_sh (sandboxed)", "(goal <= 1.3x: ", 1),
        ("call true_exec (--yolo)", "(goal <= 1.3x: ", 1),
        ("call true_exec (sandboxed)", "(goal <= 1.15x: ", 2),
        ("call true_exec (sandboxed)", "(goal <= 1.3x: ", 1),
    ] {
        let goals: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains(goal))
            .collect();
        assert_eq!(goals.len(), count, "{prefix} {goal}: {out}");
        assert!(goals[0].contains("n=32"), "{}", goals[0]);
    }
    assert!(
        out.lines()
            .any(|l| l.contains("baseline call true_exec (sandboxed, no containment)")),
        "{out}"
    );
    for kind in ["true_sh", "true_exec"] {
        let l = out
            .lines()
            .find(|l| {
                l.starts_with(&format!("call {kind} (sandboxed)"))
                    && l.contains("(sandboxed, no tools PID namespace)")
            })
            .unwrap_or_else(|| panic!("no tools-namespace line for {kind}: {out}"));
        assert!(l.contains("(goal <= 1.05x: "), "{l}");
    }
    assert!(line_of(&out, "bare posix_spawn /bin/true").contains("ratio"));
    for level in [2, 8, 32] {
        for mode in ["--yolo", "sandboxed"] {
            let l = line_of(&out, &format!("call x{level} ({mode})"));
            assert!(
                l.contains(&format!("calls/s | baseline bare Command x{level} "))
                    && l.contains("(goal >= 0.8x: "),
                "{l}"
            );
        }
    }
    assert_eq!(out.matches("   run ").count(), 3, "{out}");
    assert!(out.contains("delivered 8388608 bytes") || out.contains("bytes omitted"));
    let f = line_of(&out, "follow out (delivered)");
    assert!(
        f.contains("MB/s | baseline pipe read ") && f.contains("(goal >= 0.5x: "),
        "{f}"
    );
    assert!(
        out.contains("nothing was omitted") || out.contains("FINDING: the follower fell behind"),
        "{out}"
    );
}

#[test]
fn sandbox_reports_yolo_bwrap_and_the_loaded_spawn_rate() {
    let out = bench(&["sandbox", "--iters", "20"]);
    // The sandboxed call twice: against --yolo, and with the filesystem view
    // against the same call without it (TOOLSRV_VIEW=off).
    let sand: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("call true_exec (sandboxed)"))
        .collect();
    assert!(
        sand.iter()
            .any(|l| l.contains("baseline call true_exec (--yolo)")
                && l.contains("(goal <= 1.15x: ")),
        "{out}"
    );
    assert!(
        sand.iter()
            .any(|l| l.contains("(sandboxed, TOOLSRV_VIEW=off)") && l.contains("(goal <= 1.05x: ")),
        "{out}"
    );
    let bwrap_ok = out.contains("(goal >= 3x: ");
    assert!(
        bwrap_ok || out.contains("bwrap figures skipped"),
        "neither bwrap figures nor why not: {out}"
    );
    if !bwrap_ok {
        // The rest of this test runs; the bwrap comparison is what is skipped.
        let why = out
            .lines()
            .find(|l| l.contains("bwrap cannot run here"))
            .unwrap_or("bwrap figures skipped")
            .trim()
            .to_string();
        if std::process::Command::new("bwrap")
            .arg("--version")
            .output()
            .is_err()
        {
            toolsrv_testkit::skip::missing_prerequisite(
                "bubblewrap (bwrap, the bench's comparison)",
            );
        } else {
            toolsrv_testkit::skip::cannot_run_here(&format!("the bwrap comparison: {why}"));
        }
    }
    let header = line_of(&out, "== sandbox-loaded:");
    let rss: u64 = header
        .split("VmRSS ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {header}"));
    assert!(rss >= 256, "{header}");
    assert!(line_of(&out, "spawn rate x2 (idle server)").contains("calls/s"));
    let loaded: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("spawn rate x2 (") && l.contains(" MiB RSS)"))
        .collect();
    assert_eq!(loaded.len(), 1, "{out}");
    assert!(loaded[0].contains("(goal >= 0.8x: "), "{}", loaded[0]);
}

#[test]
fn load_reports_failures_zombies_descriptors_and_peak_rss() {
    let out = bench(&["load", "--iters", "20"]);
    assert!(
        out.contains("== load: 32 agents x 20 mixed calls") && out.contains("100 hostile idle"),
        "{out}"
    );
    let calls = line_of(&out, "load calls");
    assert!(
        calls.contains("640 calls in") && calls.contains("failures 0 (goal 0: met)"),
        "{calls}"
    );
    assert!(line_of(&out, "load hostile").contains("100 idle connections held"));
    assert!(line_of(&out, "load zombies").contains("0 (goal 0: met)"));
    assert!(line_of(&out, "load descriptors").contains("(goal: back to baseline: met)"));
    assert!(line_of(&out, "load peak RSS").contains("MiB | idle server "));
}

#[test]
fn unknown_bench_and_bad_iters_exit_2() {
    let bench = env!("CARGO_BIN_EXE_toolsrv-bench");
    let out = Command::new(bench).arg("nope").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown bench \"nope\"; known: rtt"));
    let out = Command::new(bench)
        .args(["--iters", "-3"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iters \"-3\""));
}

#[test]
fn missing_server_binary_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsrv-bench"))
        .arg("rtt")
        .env("TOOLSRV_BIN", "/nonexistent/toolsrv")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("toolsrv binary not found at /nonexistent/toolsrv"),
        "{stderr}"
    );
}

#[test]
fn remote_reports_the_ssh_hop_as_a_ratio_and_brings_the_remote_down() {
    if !toolsrv_testkit::Sshd::available() {
        toolsrv_testkit::skip::missing_prerequisite(
            "OpenSSH (sshd and ssh; apt-get install openssh-server openssh-client)",
        );
        return;
    }
    let stdout = bench(&["remote", "--iters", "30"]);
    for name in [
        "call shell true (ssh forward)",
        "read_file info (ssh forward)",
    ] {
        let l = stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {stdout}"));
        assert!(l.contains("n=30") && l.contains("| ratio "), "{l}");
    }
}

/// `mcp` prints the bridge's round trip beside the same call over 9P, as a
/// ratio with its goal.
#[test]
fn mcp_reports_the_bridge_beside_9p() {
    let stdout = bench(&["mcp", "--iters", "30"]);
    assert!(stdout.contains("== mcp: tools/call"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mcp tools/call /bin/true"))
        .unwrap_or_else(|| panic!("no mcp line: {stdout}"));
    assert!(
        line.contains("| baseline 9p call /bin/true median") && line.contains("(goal <= 1.2x: "),
        "{line}"
    );
}

/// `call-cpu` with the same binary as before and after: every mode prints
/// latency (or rate) beside the bare spawn, each build's server CPU per call
/// and the paired ratio.
#[test]
fn call_cpu_compares_two_builds_block_by_block() {
    let bin = toolsrv_testkit::toolsrv_bin();
    let canonical = std::fs::canonicalize(bin).expect("canonical path");
    let out = bench(&[
        "call-cpu",
        "--iters",
        "20",
        "--before",
        &bin.to_string_lossy(),
    ]);
    assert!(
        out.contains(&format!("  before: {}", canonical.display())),
        "{out}"
    );
    assert_eq!(out.matches("== call-cpu: ").count(), 4, "{out}");
    for mode in ["sandboxed", "--yolo"] {
        for who in ["before", "after"] {
            let prefixes = [
                format!("call ({mode}, {who}) "),
                format!("call x8 ({mode}, {who}) "),
            ];
            for (prefix, vs_bare) in prefixes.iter().zip([
                "n=20) | baseline bare posix_spawn /bin/true median",
                "calls/s | baseline bare posix_spawn x8 ",
            ]) {
                let lines: Vec<&str> = out
                    .lines()
                    .filter(|l| l.starts_with(prefix.as_str()))
                    .collect();
                assert!(lines.iter().any(|l| l.contains(vs_bare)), "{prefix}: {out}");
                // after is also printed beside before
                let vs_before = lines.iter().any(|l| l.contains("| baseline call"));
                assert_eq!(vs_before, who == "after", "{prefix}: {out}");
            }
        }
        assert!(line_of(&out, &format!("server CPU/call ({mode}, before)")).contains("n=20)"));
        let after = line_of(&out, &format!("server CPU/call ({mode}, after)"));
        assert!(after.contains("| baseline server CPU/call"), "{after}");
        assert!(line_of(&out, &format!("server CPU/call x8 ({mode}, after)")).contains("ratio"));
    }
    let paired: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("after/before, paired blocks median "))
        .collect();
    assert_eq!(paired.len(), 4, "{out}");
    assert!(paired.iter().all(|l| l.contains("n=20 rounds")), "{out}");
    assert_eq!(out.matches("utime+stime (10 ms ticks)").count(), 8, "{out}");
}

#[test]
fn call_cpu_without_before_says_how_to_pass_it() {
    let out = bench(&["call-cpu", "--iters", "4"]);
    assert!(
        line_of(&out, "call (sandboxed, current)").contains("n=4) |"),
        "{out}"
    );
    assert!(!out.contains("after/before"), "{out}");
    assert!(out.contains("no --before: pass --before <path-to-an-older-toolsrv-binary>"));
}

#[test]
fn call_cpu_names_a_bad_before_binary() {
    for (path, why) in [
        ("/nonexistent/toolsrv", "No such file"),
        ("/", "not a regular file"),
        ("/etc/passwd", "not executable (mode "),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolsrv-bench"))
            .args(["call-cpu", "--before", path])
            .env("TOOLSRV_BIN", toolsrv_testkit::toolsrv_bin())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{path}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("--before {path}: {why}")),
            "{stderr}"
        );
    }
}

#[test]
fn startup_times_the_first_call_of_fresh_servers_beside_warm_calls() {
    let bin = toolsrv_testkit::toolsrv_bin();
    let out = bench(&[
        "startup",
        "--iters",
        "1",
        "--before",
        &bin.to_string_lossy(),
    ]);
    assert_eq!(out.matches("== startup: ").count(), 1, "{out}");
    for label in ["", "before "] {
        let warm = line_of(&out, &format!("{label}warm call "));
        assert!(
            warm.contains("n=20) | baseline bare posix_spawn /bin/true median"),
            "{warm}"
        );
        let at_once = line_of(&out, &format!("{label}first call, at once "));
        assert!(at_once.contains("n=1) | baseline "), "{at_once}");
        let late = line_of(&out, &format!("{label}first call, after 500 ms "));
        assert!(late.contains("(goal <= 4x: "), "{late}");
    }
    assert!(
        line_of(&out, "first call after 500 ms, this ").contains("| baseline before median"),
        "{out}"
    );
}

#[test]
fn watch_reports_event_and_quarantine_latency_beside_inotify() {
    let out = bench(&["watch", "--iters", "100"]);
    assert!(
        out.contains("== watch: a process in a tools PID namespace"),
        "{out}"
    );
    assert!(line_of(&out, "create -> inotify event (bench)").contains("n=100"));
    let e = line_of(&out, "create -> event (tools namespace)");
    assert!(
        e.contains("| baseline create -> inotify event (bench) median") && e.contains("[p99 "),
        "{e}"
    );
    let q = line_of(&out, "create -> quarantined");
    assert!(q.contains("(goal p99 < 50.00 ms: "), "{q}");
    let m = line_of(&out, "Quarantine::move_in of a file");
    assert!(
        m.contains("| baseline renameat2 of a file (bench) median"),
        "{m}"
    );
}

#[test]
fn proxy_reports_the_download_rate_cpu_and_first_byte_beside_direct() {
    let out = bench(&["proxy", "--iters", "1"]);
    let rate = line_of(&out, "download through the proxy");
    assert!(
        rate.contains("MiB/s | baseline direct") && rate.contains("(goal >= 0.8x: "),
        "{rate}"
    );
    assert!(
        line_of(&out, "proxy CPU per MiB: ").contains(" µs ("),
        "{out}"
    );
    let first = line_of(&out, "time to first byte: direct median");
    assert!(
        first.contains("through the proxy") && first.contains("(goal <= 1.00 ms: "),
        "{first}"
    );
    let tls = line_of(&out, "small HTTPS request");
    assert!(
        tls.contains("through interception: median") && tls.contains("| baseline direct median"),
        "{tls}"
    );
}

#[test]
fn domains_reports_a_call_under_network_domains_beside_one_without() {
    let out = bench(&["domains", "--iters", "20"]);
    let line = out
        .lines()
        .find(|l| l.contains("[ratio = under network.domains / without]"))
        .unwrap_or_else(|| panic!("no ratio line: {out}"));
    assert!(
        line.starts_with("call true_exec (network.domains)")
            && line.contains("| baseline call true_exec (no domains) median")
            && line.contains("(goal <= 1.05x: "),
        "{line}"
    );
}
