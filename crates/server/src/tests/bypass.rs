//! The bypass broker through `bypass/pending` and `bypass/resolve`
//! (docs/protocol.md, "Bypass requests"): what an observer sees, approve, reject, the timeout, and
//! withdrawal by clunk or kill.

use std::time::Duration;

use serde_json::Value;
use toolsrv_wire::{Body, ORDWR, OREAD};

use super::support::{bounded, eventually, outcome, payload, Harness, Peer, SH};

/// A bypass request of `sh` running `command` for agent `a1`.
fn request(command: &str) -> Vec<(&str, &str)> {
    vec![
        ("tool", "sh"),
        ("agent", "a1"),
        ("bypass", "true"),
        ("command", command),
    ]
}

/// A server with `sh` loaded for `a1`, configured by `configure`, and an
/// observer connection with `bypass/pending` open.
async fn broker(configure: impl FnOnce(&mut super::support::Settings)) -> (Harness, Peer, u32) {
    let h = Harness::start(&[SH], configure);
    let mut c = h.connect().await;
    c.load("a1", "sh").await;
    let fid = c.open("bypass/pending", OREAD).await.expect("open pending");
    (h, c, fid)
}

/// The next request `fid` of `bypass/pending` returns.
async fn next_pending(c: &mut Peer, fid: u32) -> Value {
    let line = c.read_at(fid, 0).await.expect("read pending");
    assert_eq!(line.last(), Some(&b'\n'), "one line");
    serde_json::from_slice(&line).expect("JSON")
}

/// Start a synchronous call of `fields` on a connection of its own; the
/// task returns its ToolResult.
async fn call_in_background(
    h: &Harness,
    fields: &[(&str, &str)],
) -> tokio::task::JoinHandle<Value> {
    let mut caller = h.connect().await;
    let owned: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::spawn(async move {
        let fields: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        caller.call(&fields).await
    })
}

async fn resolve(c: &mut Peer, resolution: &str) -> Result<(), String> {
    c.write_file("bypass/resolve", resolution).await
}

#[tokio::test]
async fn a_bypass_request_is_pending_with_what_will_run() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let pid = c
            .bg(&[
                &request("echo hi")[..],
                &[("session", "s1"), ("env.FOO", "bar")],
            ]
            .concat())
            .await
            .expect("bg");
        let st = c.proc_stat(pid).await.expect("stat");
        assert_eq!(st["state"], "awaiting_approval");
        assert_eq!(st["exit_code"], Value::Null);
        let req = next_pending(&mut c, pending).await;
        assert_eq!(req["id"], "b1");
        assert_eq!(req["pid"], pid);
        assert_eq!(req["agent"], "a1");
        assert_eq!(req["session"], "s1");
        assert_eq!(req["tool"], "sh");
        assert!(
            req["command"]
                .as_str()
                .expect("command")
                .contains("echo hi"),
            "{req}"
        );
        assert_eq!(req["cwd"], h.cwd.display().to_string());
        assert_eq!(req["env"]["FOO"], "bar");
        assert_eq!(req["env"]["OLLIE_AGENT_ID"], "a1");
        assert_eq!(req["request_env"], serde_json::json!({"FOO": "bar"}));
        assert!(
            req["created"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{req}"
        );
        assert_eq!(h.server.broker.len(), 1);
    })
    .await
}

#[tokio::test]
async fn an_approved_request_runs_unsandboxed_on_a_sandboxed_server() {
    bounded(async {
        let (_h, mut c, pending) = broker(|_| {}).await;
        let pid = c.bg(&request("echo approved; exit 5")).await.expect("bg");
        let id = next_pending(&mut c, pending).await["id"].clone();
        resolve(&mut c, &format!(r#"{{"id": {id}, "approve": true}}"#))
            .await
            .expect("approve");
        assert_eq!(c.wait(pid).await.expect("wait"), 5);
        let st = c.proc_stat(pid).await.expect("stat");
        assert_eq!(st["state"], "exited");
        assert_eq!(st["sandboxed"], false);
        let out = c.read_file(&format!("proc/{pid}/out")).await.expect("out");
        assert_eq!(out, "approved\n");
    })
    .await
}

#[tokio::test]
async fn a_synchronous_bypass_call_returns_once_approved() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let call = call_in_background(&h, &request("echo done")).await;
        let id = next_pending(&mut c, pending).await["id"].clone();
        resolve(&mut c, &format!(r#"{{"id": {id}, "approve": true}}"#))
            .await
            .expect("approve");
        let r = call.await.expect("the call");
        assert_eq!(outcome(&r), (false, "done\n".to_string()));
    })
    .await
}

#[tokio::test]
async fn a_rejected_call_is_an_error_result_with_the_reason() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let marker = h.cwd.join("ran");
        let command = format!("touch {}", marker.display());
        let call = call_in_background(&h, &request(&command)).await;
        let id = next_pending(&mut c, pending).await["id"].clone();
        resolve(
            &mut c,
            &format!(r#"{{"id": {id}, "approve": false, "reason": "not now"}}"#),
        )
        .await
        .expect("reject");
        let r = call.await.expect("the call");
        assert_eq!(outcome(&r), (true, "bypass rejected: not now".to_string()));
        assert!(!marker.exists(), "a rejected request ran");
    })
    .await
}

#[tokio::test]
async fn a_rejected_background_process_ends_rejected_with_126() {
    bounded(async {
        let (_h, mut c, pending) = broker(|c| c.yolo = true).await;
        let pid = c.bg(&request("true")).await.expect("bg");
        let id = next_pending(&mut c, pending).await["id"].clone();
        resolve(&mut c, &format!(r#"{{"id": {id}, "approve": false}}"#))
            .await
            .expect("reject");
        assert_eq!(c.wait(pid).await.expect("wait"), 126);
        assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "rejected");
        let out = c.read_file(&format!("proc/{pid}/out")).await.expect("out");
        assert!(out.starts_with("bypass rejected: "), "{out}");
    })
    .await
}

#[tokio::test]
async fn an_unresolved_request_is_rejected_after_the_bypass_timeout() {
    bounded(async {
        let (h, _c, _pending) = broker(|c| {
            c.yolo = true;
            c.bypass_timeout = Duration::from_millis(200);
        })
        .await;
        let call = call_in_background(&h, &request("true")).await;
        let r = call.await.expect("the call");
        assert_eq!(
            outcome(&r),
            (true, "bypass rejected: timed out".to_string())
        );
        assert!(h.server.broker.is_empty());
    })
    .await
}

#[tokio::test]
async fn resolving_an_unknown_or_resolved_request_fails_naming_it() {
    bounded(async {
        let (_h, mut c, pending) = broker(|c| c.yolo = true).await;
        let e = resolve(&mut c, r#"{"id": "b99", "approve": true}"#)
            .await
            .expect_err("resolves");
        assert_eq!(e, r#"unknown bypass request "b99""#);
        let pid = c.bg(&request("true")).await.expect("bg");
        let id = next_pending(&mut c, pending).await["id"].clone();
        let approve = format!(r#"{{"id": {id}, "approve": true}}"#);
        resolve(&mut c, &approve).await.expect("approve");
        let e = resolve(&mut c, &approve).await.expect_err("resolves twice");
        assert_eq!(e, format!("unknown bypass request {id}"));
        c.wait(pid).await.expect("wait");
    })
    .await
}

#[tokio::test]
async fn a_malformed_resolution_fails_with_the_parsers_message() {
    bounded(async {
        let (h, mut c, _pending) = broker(|c| c.yolo = true).await;
        for (bad, want) in [
            ("not json", "expected"),
            (r#"{"approve": true}"#, "missing field `id`"),
            (r#"{"id": "b1", "approve": "yes"}"#, "invalid type"),
        ] {
            let e = resolve(&mut c, bad).await.expect_err(bad);
            assert!(e.contains(want), "{bad}: {e}");
        }
        assert!(h.server.broker.is_empty());
    })
    .await
}

#[tokio::test]
async fn clunking_a_waiting_call_withdraws_its_request() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let mut caller = h.connect().await;
        let fid = caller.open("proc/new", ORDWR).await.expect("open");
        caller
            .write(fid, payload(&request("true")).as_bytes())
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
        let id = next_pending(&mut c, pending).await["id"].clone();
        caller.send(10, Body::Tclunk { fid }).await;
        let mut tags = Vec::new();
        for _ in 0..2 {
            let f = caller.recv().await;
            if f.tag == 10 {
                assert_eq!(f.body, Body::Rclunk);
            }
            tags.push(f.tag);
        }
        tags.sort();
        assert_eq!(tags, [9, 10]);
        eventually(|| h.server.broker.is_empty()).await;
        let e = resolve(&mut c, &format!(r#"{{"id": {id}, "approve": true}}"#))
            .await
            .expect_err("resolves");
        assert!(e.starts_with("unknown bypass request"), "{e}");
    })
    .await
}

#[tokio::test]
async fn killing_a_process_awaiting_approval_withdraws_its_request() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let pid = c.bg(&request("true")).await.expect("bg");
        next_pending(&mut c, pending).await;
        c.write_file(&format!("proc/{pid}/ctl"), "kill")
            .await
            .expect("kill");
        assert_eq!(c.wait(pid).await.expect("wait"), 128 + 9);
        assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "killed");
        assert!(h.server.broker.is_empty());
    })
    .await
}

#[tokio::test]
async fn observers_that_may_be_the_servers_tools_are_refused() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let me = std::process::id() as i32;
        // Unknown peer, a peer counted as a tool at accept, and this process
        // itself (its descendants are the server's tools).
        for (pid, descendant) in [(None, false), (Some(1), true), (Some(me), false)] {
            let mut c = h.connect_as(pid, descendant).await;
            for (path, mode) in [
                ("bypass/pending", OREAD),
                ("bypass/resolve", toolsrv_wire::OWRITE),
            ] {
                let e = c.open(path, mode).await.expect_err(path);
                assert_eq!(e, "permission denied", "{path} from {pid:?}/{descendant}");
            }
            // The rest of the namespace still serves them.
            assert!(c.read_file("info").await.is_ok());
        }
    })
    .await
}

#[tokio::test]
async fn a_pending_read_returns_a_request_submitted_after_it_began() {
    bounded(async {
        let (h, mut c, pending) = broker(|c| c.yolo = true).await;
        let reader = tokio::spawn(async move {
            let r = next_pending(&mut c, pending).await;
            (c, r)
        });
        let mut submitter = h.connect().await;
        let pid = submitter.bg(&request("true")).await.expect("bg");
        let (_c, req) = reader.await.expect("the reader");
        assert_eq!(req["pid"], pid);
    })
    .await
}

#[tokio::test]
async fn each_observer_sees_every_pending_request_once_in_order() {
    bounded(async {
        let (_h, mut c, first) = broker(|c| c.yolo = true).await;
        let p1 = c.bg(&request("true")).await.expect("bg");
        let p2 = c.bg(&request("true")).await.expect("bg");
        assert_eq!(next_pending(&mut c, first).await["pid"], p1);
        assert_eq!(next_pending(&mut c, first).await["pid"], p2);
        // Another observer starts from the oldest still pending.
        let second = c.open("bypass/pending", OREAD).await.expect("open");
        let b1 = next_pending(&mut c, second).await;
        assert_eq!(b1["pid"], p1);
        resolve(
            &mut c,
            &format!(r#"{{"id": {}, "approve": false}}"#, b1["id"]),
        )
        .await
        .expect("reject");
        let third = c.open("bypass/pending", OREAD).await.expect("open");
        assert_eq!(next_pending(&mut c, third).await["pid"], p2);
    })
    .await
}
