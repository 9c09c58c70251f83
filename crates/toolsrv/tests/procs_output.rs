//! docs/protocol.md, "Requests and results" (output) and "Processes" (`out`): following live output from another
//! connection, the output safety limit with its exact marker, bounded memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolsrv_wire::{Body, OREAD};

use crate::procs_util::{
    call, list, ok_text, patient, payload, shell_session, start_read, stat, tools_session,
    vm_rss_kib,
};
use crate::util::{wait_until, WAIT};

const LINES: &str = "description: Lines over a second\ncommand: \"for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done\"\n";
const MIB: &str =
    "description: 1 MiB of numbered lines\ncommand: \"seq 1 1000000 | head -c 1048576\"\n";

/// The exact bytes `seq 1 1000000 | head -c n` prints.
fn seq_bytes(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 16);
    let mut i = 1u32;
    while v.len() < n {
        v.extend_from_slice(format!("{i}\n").as_bytes());
        i += 1;
    }
    v.truncate(n);
    v
}

fn marker(n: u64) -> String {
    format!("\n[toolsrv: {n} bytes omitted]\n")
}

#[test]
fn out_is_followed_from_a_second_connection_while_a_sync_call_runs() {
    let (srv, mut c) = tools_session(&[("lines.yaml", LINES)], &[]);
    let tag = start_read(
        &mut c,
        20,
        "proc/new",
        &payload(&[("tool", "lines"), ("agent", "a1")]),
    );
    let mut f = srv.attached();
    let mut pid = None;
    assert!(wait_until(WAIT, || {
        pid = list(&mut f, Some("a1"))
            .first()
            .and_then(|p| p["pid"].as_u64());
        pid.is_some()
    }));
    let pid = pid.unwrap_or_default();
    f.walk(30, &format!("proc/{pid}/out")).expect("walk out");
    f.ok(Body::Topen {
        fid: 30,
        mode: OREAD,
    });
    let mut got = Vec::new();
    let mut seen_while_running = false;
    loop {
        let data = match f.ok(Body::Tread {
            fid: 30,
            offset: got.len() as u64,
            count: 4096,
        }) {
            Body::Rread { data } => data,
            b => panic!("{b:?}"),
        };
        if data.is_empty() {
            break;
        }
        if got.is_empty() {
            // The first bytes arrive while the call has not returned.
            seen_while_running = stat(&mut f, pid)["state"] == "running";
        }
        got.extend_from_slice(&data);
    }
    assert!(
        seen_while_running,
        "the follower saw output only after the end"
    );
    let want = "line1\nline2\nline3\nline4\nline5\n";
    assert_eq!(String::from_utf8_lossy(&got), want);
    // The sync call returns the same text.
    let r = c.recv();
    assert_eq!(r.tag, tag);
    let Body::Rread { data } = r.body else {
        panic!("{:?}", r.body)
    };
    let v: Value = serde_json::from_slice(&data).expect("json");
    assert_eq!(ok_text(&v), want);
    // Read at the end once it ended: 0 bytes; a new reader gets it all.
    match f.ok(Body::Tread {
        fid: 30,
        offset: got.len() as u64,
        count: 4096,
    }) {
        Body::Rread { data } => assert!(data.is_empty()),
        b => panic!("{b:?}"),
    }
    assert_eq!(f.read_file(&format!("proc/{pid}/out")), want.as_bytes());
}

#[test]
fn the_output_limit_keeps_both_halves_and_counts_the_gap_exactly() {
    let (_srv, mut c) = tools_session(&[("mib.yaml", MIB)], &["--max-output", "64KiB"]);
    let all = seq_bytes(1 << 20);
    let half = 32 * 1024;
    let mut want = all[..half].to_vec();
    want.extend_from_slice(marker((all.len() - 2 * half) as u64).as_bytes());
    want.extend_from_slice(&all[all.len() - half..]);
    assert!(String::from_utf8_lossy(&want).contains("[toolsrv: 983040 bytes omitted]"));
    let r = crate::procs_util::call_held(&mut c, 91, &[("tool", "mib"), ("agent", "a1")]);
    let t = ok_text(&r);
    assert_eq!(t.len(), want.len());
    assert!(
        t.as_bytes() == want.as_slice(),
        "result differs from head + marker + tail"
    );
    // `out` of the finished process holds the same.
    let pid = list(&mut c, Some("a1"))[0]["pid"].as_u64().expect("pid");
    let out = c.read_file(&format!("proc/{pid}/out"));
    assert!(out == want, "out differs ({} bytes)", out.len());
}

#[test]
fn a_gigabyte_of_output_keeps_the_server_small() {
    let (srv, mut c) = shell_session(&[]);
    patient(&mut c, Duration::from_secs(300));
    let server = srv.pid();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut max = 0;
            while !done.load(Ordering::Relaxed) {
                max = max.max(vm_rss_kib(server).unwrap_or(0));
                std::thread::sleep(Duration::from_millis(10));
            }
            max.max(vm_rss_kib(server).unwrap_or(0))
        })
    };
    let r = call(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", "yes | head -c 1073741824"),
            ("timeout", "5m"),
        ],
    );
    done.store(true, Ordering::Relaxed);
    let max_kib = sampler.join().expect("sampler");
    eprintln!("1 GiB of output: server VmRSS peaked at {max_kib} KiB");
    let t = ok_text(&r);
    let limit = 8usize << 20;
    let m = marker((1u64 << 30) - limit as u64);
    assert_eq!(t.len(), limit + m.len());
    let (head, rest) = t.split_at(limit / 2);
    let (mid, tail) = rest.split_at(m.len());
    assert!(
        head.as_bytes().chunks(2).all(|p| p == b"y\n"),
        "head intact"
    );
    assert_eq!(mid, m);
    assert!(
        tail.as_bytes().chunks(2).all(|p| p == b"y\n"),
        "tail intact"
    );
    assert!(
        max_kib < 64 * 1024,
        "server VmRSS reached {max_kib} KiB (limit 64 MiB)"
    );
}
