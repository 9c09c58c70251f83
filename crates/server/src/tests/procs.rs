//! The process table (docs/protocol.md, "Processes"; docs/containment.md): pids, `proc/<pid>/ctl`, following
//! output, dismissal, retention bounds and garbage collection.

use std::time::Duration;

use serde_json::Value;
use toolsrv_wire::{Body, ORDWR, OREAD};

use super::support::{bounded, eventually, outcome, payload, Harness, Peer, SH};

/// A server with `sh` loaded for `a1` and `a2`, configured by `configure`.
async fn table(configure: impl FnOnce(&mut super::support::Settings)) -> (Harness, Peer) {
    let h = Harness::start(&[SH], |c| {
        c.yolo = true;
        configure(c);
    });
    let mut c = h.connect().await;
    c.load("a1", "sh").await;
    c.load("a2", "sh").await;
    (h, c)
}

/// Start `command` in the background for `agent`.
async fn start(c: &mut Peer, agent: &str, command: &str) -> u64 {
    c.bg(&[("tool", "sh"), ("agent", agent), ("command", command)])
        .await
        .unwrap_or_else(|e| panic!("bg {command}: {e}"))
}

/// Write `command` to `proc/<pid>/ctl`.
async fn ctl(c: &mut Peer, pid: u64, command: &str) -> Result<(), String> {
    c.write_file(&format!("proc/{pid}/ctl"), command).await
}

/// The pids `proc/list` shows.
async fn listed(c: &mut Peer) -> Vec<u64> {
    let v: Value =
        serde_json::from_str(&c.read_file("proc/list").await.expect("list")).expect("JSON");
    v.as_array()
        .expect("array")
        .iter()
        .map(|p| p["pid"].as_u64().expect("pid"))
        .collect()
}

/// Whether the OS process `pid` still exists (a zombie counts).
fn os_process_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn pids_are_the_servers_own_counting_up_from_one() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pids = [
            start(&mut c, "a1", "true").await,
            start(&mut c, "a2", "true").await,
            start(&mut c, "a1", "true").await,
        ];
        assert_eq!(pids, [1, 2, 3]);
    })
    .await
}

#[tokio::test]
async fn a_running_process_stats_as_running_with_no_end() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "sleep 30").await;
        let st = c.proc_stat(pid).await.expect("stat");
        assert_eq!(st["state"], "running");
        assert_eq!(st["exit_code"], Value::Null);
        assert_eq!(st["ended"], Value::Null);
        assert_eq!(st["tool"], "sh");
        assert_eq!(st["session"], Value::Null);
        ctl(&mut c, pid, "kill").await.expect("kill");
        c.wait(pid).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn kill_ends_a_running_process_as_killed_with_137() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "sleep 30").await;
        ctl(&mut c, pid, "kill").await.expect("kill");
        assert_eq!(c.wait(pid).await.expect("wait"), 137);
        let st = c.proc_stat(pid).await.expect("stat");
        assert_eq!(st["state"], "killed");
        assert!(st["ended"].is_string());
    })
    .await
}

#[tokio::test]
async fn signals_are_taken_by_number_name_and_full_name() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        for sig in ["15", "TERM", "SIGTERM"] {
            let pid = start(&mut c, "a1", "sleep 30").await;
            ctl(&mut c, pid, &format!("signal {sig}"))
                .await
                .unwrap_or_else(|e| panic!("{sig}: {e}"));
            assert_eq!(c.wait(pid).await.expect("wait"), 128 + 15, "{sig}");
            assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "killed");
        }
    })
    .await
}

#[tokio::test]
async fn unknown_signals_and_commands_fail_naming_them() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "sleep 30").await;
        for (command, want) in [
            ("signal BOGUS", r#"unknown signal "BOGUS""#),
            ("signal 0", r#"unknown signal "0""#),
            ("signal 65", r#"unknown signal "65""#),
        ] {
            assert_eq!(ctl(&mut c, pid, command).await.expect_err(command), want);
        }
        let e = ctl(&mut c, pid, "frobnicate").await.expect_err("applies");
        assert!(
            e.starts_with(r#"unknown process command "frobnicate""#),
            "{e}"
        );
        assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "running");
        ctl(&mut c, pid, "kill").await.expect("kill");
        c.wait(pid).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn signalling_an_ended_process_fails() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "true").await;
        c.wait(pid).await.expect("wait");
        assert_eq!(
            ctl(&mut c, pid, "kill").await.expect_err("kills"),
            format!("process {pid} is not running")
        );
    })
    .await
}

#[tokio::test]
async fn dismissing_a_running_process_fails_and_keeps_it() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "sleep 30").await;
        assert_eq!(
            ctl(&mut c, pid, "dismiss").await.expect_err("dismisses"),
            format!("process {pid} is still running")
        );
        assert_eq!(listed(&mut c).await, [pid]);
        ctl(&mut c, pid, "kill").await.expect("kill");
        c.wait(pid).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn dismiss_removes_a_finished_process_from_the_namespace() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = start(&mut c, "a1", "true").await;
        c.wait(pid).await.expect("wait");
        ctl(&mut c, pid, "dismiss").await.expect("dismiss");
        assert!(c.walk(&format!("proc/{pid}")).await.is_err());
        assert_eq!(listed(&mut c).await, Vec::<u64>::new());
    })
    .await
}

#[tokio::test]
async fn a_synchronous_call_is_dismissed_once_its_result_is_read_and_its_fid_clunked() {
    bounded(async {
        let (h, mut c) = table(|_| {}).await;
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", "echo hi")])
            .await;
        assert_eq!(outcome(&r), (false, "hi\n".to_string()));
        eventually(|| h.server.procs.list(None).is_empty()).await;
        assert!(c.walk("proc/1").await.is_err());
    })
    .await
}

#[tokio::test]
async fn a_synchronous_call_stays_while_a_file_of_its_directory_is_open() {
    bounded(async {
        let (h, mut c) = table(|_| {}).await;
        let go = h.cwd.join("go");
        let command = format!(
            "echo begun; while [ ! -e {} ]; do sleep 0.01; done",
            go.display()
        );
        let mut caller = h.connect().await;
        let call = tokio::spawn(async move {
            let r = caller
                .call(&[("tool", "sh"), ("agent", "a1"), ("command", &command)])
                .await;
            (caller, r)
        });
        eventually(|| !h.server.procs.list(None).is_empty()).await;
        let pid = listed(&mut c).await[0];
        let stat = c
            .open(&format!("proc/{pid}/stat"), OREAD)
            .await
            .expect("open stat");
        std::fs::write(&go, "").expect("touch go");
        let (_caller, r) = call.await.expect("the call");
        assert_eq!(outcome(&r), (false, "begun\n".to_string()));
        // The call's fid is clunked, but `stat` is open: the entry stays.
        assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "exited");
        assert_eq!(listed(&mut c).await, [pid]);
        c.clunk(stat).await;
        eventually(|| h.server.procs.get(pid).is_none()).await;
    })
    .await
}

#[tokio::test]
async fn out_follows_live_output_and_ends_when_the_process_ends() {
    bounded(async {
        let (h, mut c) = table(|_| {}).await;
        let go = h.cwd.join("go");
        let command = format!(
            "echo first; while [ ! -e {} ]; do sleep 0.01; done; echo second",
            go.display()
        );
        let pid = start(&mut c, "a1", &command).await;
        let out = c
            .open(&format!("proc/{pid}/out"), OREAD)
            .await
            .expect("open out");
        assert_eq!(c.read_at(out, 0).await.expect("read"), b"first\n");
        // A read at the end waits for more.
        c.send(
            9,
            Body::Tread {
                fid: out,
                offset: 6,
                count: 100,
            },
        )
        .await;
        std::fs::write(&go, "").expect("touch go");
        let f = c.recv().await;
        assert_eq!(
            (f.tag, f.body),
            (
                9,
                Body::Rread {
                    data: b"second\n".to_vec()
                }
            )
        );
        assert_eq!(c.read_at(out, 13).await.expect("read"), b"");
        c.clunk(out).await;
    })
    .await
}

#[tokio::test]
async fn wait_blocks_until_the_process_ends() {
    bounded(async {
        let (h, mut c) = table(|_| {}).await;
        let go = h.cwd.join("go");
        let command = format!(
            "while [ ! -e {} ]; do sleep 0.01; done; exit 9",
            go.display()
        );
        let pid = start(&mut c, "a1", &command).await;
        let wait = c
            .open(&format!("proc/{pid}/wait"), OREAD)
            .await
            .expect("open wait");
        c.send(
            9,
            Body::Tread {
                fid: wait,
                offset: 0,
                count: 100,
            },
        )
        .await;
        assert!(!h.server.procs.get(pid).expect("listed").is_finished());
        std::fs::write(&go, "").expect("touch go");
        let f = c.recv().await;
        assert_eq!(
            (f.tag, f.body),
            (
                9,
                Body::Rread {
                    data: b"9\n".to_vec()
                }
            )
        );
        c.clunk(wait).await;
    })
    .await
}

#[tokio::test]
async fn clunking_a_running_call_kills_its_process_and_leaves_none() {
    bounded(async {
        let (h, _c) = table(|_| {}).await;
        let pidfile = h.cwd.join("pid");
        let command = format!("echo $$ > {}; exec sleep 30", pidfile.display());
        let mut caller = h.connect().await;
        let fid = caller.open("proc/new", ORDWR).await.expect("open");
        caller
            .write(
                fid,
                payload(&[("tool", "sh"), ("agent", "a1"), ("command", &command)]).as_bytes(),
            )
            .await
            .expect("write");
        caller
            .send(
                9,
                Body::Tread {
                    fid,
                    offset: 0,
                    count: 4096,
                },
            )
            .await;
        eventually(|| std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))).await;
        let os_pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(os_process_exists(os_pid));
        caller.send(10, Body::Tclunk { fid }).await;
        let mut tags = Vec::new();
        for _ in 0..2 {
            tags.push(caller.recv().await.tag);
        }
        tags.sort();
        assert_eq!(tags, [9, 10]);
        // Killed and reaped: no process, not even a zombie.
        eventually(|| !os_process_exists(os_pid)).await;
        eventually(|| h.server.procs.active() == 0).await;
    })
    .await
}

#[tokio::test]
async fn finished_processes_beyond_max_finished_are_dismissed_oldest_first() {
    bounded(async {
        let (h, mut c) = table(|c| c.retention.max_finished = 2).await;
        let mut pids = Vec::new();
        for _ in 0..3 {
            let pid = start(&mut c, "a1", "true").await;
            c.wait(pid).await.expect("wait");
            pids.push(pid);
        }
        eventually(|| h.server.procs.get(pids[0]).is_none()).await;
        assert_eq!(listed(&mut c).await, pids[1..]);
    })
    .await
}

#[tokio::test]
async fn running_processes_are_not_dismissed_by_the_finished_bound() {
    bounded(async {
        let (h, mut c) = table(|c| c.retention.max_finished = 1).await;
        let running = start(&mut c, "a1", "sleep 30").await;
        let a = start(&mut c, "a1", "true").await;
        c.wait(a).await.expect("wait");
        let b = start(&mut c, "a1", "true").await;
        c.wait(b).await.expect("wait");
        eventually(|| h.server.procs.get(a).is_none()).await;
        assert_eq!(listed(&mut c).await, [running, b]);
        ctl(&mut c, running, "kill").await.expect("kill");
        c.wait(running).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn finished_output_beyond_its_total_bound_dismisses_the_oldest() {
    bounded(async {
        // Each finished process costs its output (100 bytes here), the
        // entry's overhead (`ENTRY_OVERHEAD` in procs/retention.rs, 2048
        // bytes) and its command and cwd (well under 500 bytes each entry);
        // the bound leaves room for one more process's output limit. Two
        // entries fit, a third does not (it costs more than the 1000 spare).
        let overhead = 2048;
        let (h, mut c) = table(|c| {
            c.max_output = 1000;
            c.retention.max_output_bytes = 1000 + 2 * (overhead + 100) + 1000;
        })
        .await;
        let mut pids = Vec::new();
        for _ in 0..3 {
            let pid = start(&mut c, "a1", "head -c 100 /dev/zero").await;
            c.wait(pid).await.expect("wait");
            pids.push(pid);
        }
        eventually(|| h.server.procs.get(pids[0]).is_none()).await;
        assert_eq!(listed(&mut c).await, pids[1..]);
    })
    .await
}

#[tokio::test]
async fn an_agent_at_its_background_limit_is_refused_and_others_are_not() {
    bounded(async {
        let (_h, mut c) = table(|c| c.retention.max_background_per_agent = 1).await;
        let first = start(&mut c, "a1", "sleep 30").await;
        let e = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect_err("starts");
        assert!(
            e.starts_with(r#"agent "a1" already has 1 background processes running"#),
            "{e}"
        );
        let other = start(&mut c, "a2", "true").await;
        c.wait(other).await.expect("wait");
        // Synchronous calls are not counted.
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", "echo sync")])
            .await;
        assert_eq!(outcome(&r), (false, "sync\n".to_string()));
        ctl(&mut c, first, "kill").await.expect("kill");
        c.wait(first).await.expect("wait");
        let again = start(&mut c, "a1", "true").await;
        c.wait(again).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn garbage_collection_dismisses_finished_processes_older_than_its_age() {
    bounded(async {
        let (h, mut c) = table(|_| {}).await;
        let running = start(&mut c, "a1", "sleep 30").await;
        let done = start(&mut c, "a1", "true").await;
        c.wait(done).await.expect("wait");
        assert_eq!(h.server.procs.collect_garbage(Duration::from_secs(3600)), 0);
        assert_eq!(listed(&mut c).await, [running, done]);
        assert_eq!(h.server.procs.collect_garbage(Duration::ZERO), 1);
        assert_eq!(listed(&mut c).await, [running]);
        ctl(&mut c, running, "kill").await.expect("kill");
        c.wait(running).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn output_beyond_the_limit_loses_its_middle_behind_an_exact_marker() {
    bounded(async {
        let (_h, mut c) = table(|c| c.max_output = 1000).await;
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                (
                    "command",
                    "printf 'HEAD'; head -c 5000 /dev/zero | tr '\\0' x; printf 'TAIL'",
                ),
            ])
            .await;
        let (err, text) = outcome(&r);
        assert!(!err, "{text}");
        assert!(
            text.starts_with("HEAD") && text.ends_with("TAIL"),
            "{}",
            &text[..20]
        );
        let at = text.find("\n[toolsrv: ").expect("a marker");
        let rest = &text[at + "\n[toolsrv: ".len()..];
        let end = rest.find(" bytes omitted]\n").expect("the marker's end");
        let omitted: usize = rest[..end].parse().expect("a count");
        let marker_len = "\n[toolsrv: ".len() + end + " bytes omitted]\n".len();
        assert_eq!(
            text.len() - marker_len + omitted,
            5008,
            "kept plus omitted is everything"
        );
        assert!(text.len() - marker_len <= 1000);
    })
    .await
}

#[tokio::test]
async fn a_background_process_past_its_timeout_ends_as_timeout() {
    bounded(async {
        let (_h, mut c) = table(|_| {}).await;
        let pid = c
            .bg(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("timeout", "200ms"),
                ("command", "sleep 30"),
            ])
            .await
            .expect("bg");
        c.wait(pid).await.expect("wait");
        let st = c.proc_stat(pid).await.expect("stat");
        assert_eq!(st["state"], "timeout");
        assert!(st["exit_code"].as_i64().is_some_and(|c| c > 128), "{st}");
    })
    .await
}
