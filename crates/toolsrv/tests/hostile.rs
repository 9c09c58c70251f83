//! Hostile clients cannot make the server unavailable (docs/protocol.md, "Connection"; docs/containment.md), with the flags of docs/cli.md and authentication
//! (`--secret-file`, `--max-connections`, `--auth-timeout`): idle connections,
//! fids, unread replies, request data, retained output, the process table and
//! the pinned secret.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use toolsrv_wire::{encode, Body, Frame, NOTAG, ORDWR, OREAD};

use crate::procs_util::{
    bg, call, call_shell, final_stat, list, load, ok_text, patient, payload, shell_session,
    vm_rss_kib,
};
use crate::util::{toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// Version + auth + attach on a fresh connection, or `None` when the server
/// closes it first (it is at `--max-connections`).
fn try_authed(srv: &Server, secret: &str) -> Option<(Raw, String)> {
    let mut r = try_versioned(srv)?;
    r.s.set_read_timeout(Some(WAIT)).ok()?;
    let token = r.authenticate(secret).ok()?;
    Some((r, token))
}

/// A fresh connection that got its `Rversion` within 2 s, or `None` when the
/// server closes it first.
fn try_versioned(srv: &Server) -> Option<Raw> {
    try_versioned_with(srv, 65536)
}

/// [`try_versioned`] asking for `msize`.
fn try_versioned_with(srv: &Server, msize: u32) -> Option<Raw> {
    let s = std::os::unix::net::UnixStream::connect(&srv.socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut r = Raw::from_stream(s);
    let mut buf = Vec::new();
    encode(
        &Frame {
            tag: NOTAG,
            body: Body::Tversion {
                msize,
                version: "9P2000".into(),
            },
        },
        &mut buf,
    );
    r.s.write_all(&buf).ok()?;
    match r.try_recv()?.body {
        Body::Rversion { .. } => Some(r),
        _ => None,
    }
}

/// A server started with its descriptor soft limit lowered to `soft` (as
/// many distributions set it), auth on.
fn server_with_nofile(soft: u64, extra: &[&str]) -> Server {
    Launch::new()
        .args(extra)
        .tweak(move |cmd| {
            // Safety: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let mut l = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
                    l.rlim_cur = soft.min(l.rlim_max);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                    Ok(())
                });
            }
        })
        .start()
}

/// Log lines about refusing or shedding connections.
fn refusal_lines(log: &str) -> usize {
    log.lines()
        .filter(|l| {
            l.contains("max-connections reached")
                || l.contains("descriptor limit reached")
                || l.contains("accept failed")
        })
        .count()
}

#[test]
fn idle_unauthenticated_connections_do_not_lock_out_a_real_client() {
    // A soft limit of 1024 descriptors: 1,100 idle connections would exhaust it.
    let srv = server_with_nofile(1024, &[]);
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(std::os::unix::net::UnixStream::connect(&srv.socket).expect("connect"));
    }
    let start = Instant::now();
    let mut client = None;
    let ok = wait_until(Duration::from_secs(20), || {
        client = try_authed(&srv, "s3cret");
        client.is_some()
    });
    assert!(
        ok,
        "no authenticated connection within 20 s; log tail:\n{}",
        tail(&srv.log_text())
    );
    let (mut c, token) = client.expect("client");
    load(&mut c, "a1", "shell");
    let r = call(
        &mut c,
        &[
            ("token", &token),
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", "echo served"),
        ],
    );
    assert_eq!(ok_text(&r), "served\n");
    let took = start.elapsed();
    let log = srv.log_text();
    let n = refusal_lines(&log);
    assert!(
        n <= 3,
        "{n} log lines about refused connections:\n{}",
        tail(&log)
    );
    eprintln!("authenticated after {took:?} with 1,100 idle connections; {n} refusal log lines");
    drop(idle);
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[test]
fn a_silent_connection_is_closed_after_the_auth_timeout() {
    let srv = Server::start(&["--auth-timeout", "1s", "--no-auth"]);
    let start = Instant::now();
    let mut silent = Raw::connect(&srv.socket);
    silent
        .s
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut versioned = srv.raw();
    versioned
        .s
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut attached = srv.attached();
    assert!(
        silent.closed(),
        "a silent connection was not closed within 3 s"
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        versioned.closed(),
        "a versioned, unattached connection stays"
    );
    // An attached connection stays past the timeout.
    assert!(!attached.read_file("info").is_empty());
}

#[test]
fn the_4097th_fid_is_refused_and_the_connection_stays_usable() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    // Fid 0 is the root; 4,095 more fill the table. Pipelined in one write.
    let mut buf = Vec::new();
    for fid in 1..4096u32 {
        encode(
            &Frame {
                tag: (fid % 60000) as u16,
                body: Body::Twalk {
                    fid: 0,
                    newfid: fid,
                    wnames: Vec::new(),
                },
            },
            &mut buf,
        );
    }
    c.send_bytes(&buf);
    for _ in 1..4096 {
        match c.recv().body {
            Body::Rwalk { .. } => {}
            b => panic!("walk {b:?}"),
        }
    }
    let e = c.err(Body::Twalk {
        fid: 0,
        newfid: 5000,
        wnames: Vec::new(),
    });
    assert_eq!(e, "too many fids");
    // Walking a fid onto itself creates none, and is still allowed.
    c.ok(Body::Twalk {
        fid: 7,
        newfid: 7,
        wnames: vec!["proc".into()],
    });
    // Usable: clunk one, and the next walk works.
    c.ok(Body::Tclunk { fid: 1 });
    assert_eq!(c.walk(5000, "info"), Ok(()));
    c.ok(Body::Topen {
        fid: 5000,
        mode: OREAD,
    });
    assert!(!c.read_all(5000).is_empty());
}

/// Bytes of `size` from a `head -c` background run, waited for; its pid.
fn finished_bg(c: &mut Raw, size: u64) -> u64 {
    let pid = bg(
        c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", &format!("head -c {size} /dev/zero")),
        ],
    )
    .expect("bg");
    let code = c.read_file(&format!("proc/{pid}/wait"));
    assert_eq!(code, b"0\n");
    pid
}

#[test]
fn pipelined_reads_never_read_do_not_grow_the_server_and_others_are_served() {
    let (srv, mut c) = shell_session(&[]);
    let pid = finished_bg(&mut c, 8 << 20);
    // Another call first, so lazily built state is in the baseline.
    ok_text(&call_shell(&mut c, "true"));
    let rss0 = vm_rss_kib(srv.pid()).expect("rss");
    let mut h = Raw::connect(&srv.socket);
    h.version(1 << 20);
    h.ok(Body::Tattach {
        fid: 0,
        afid: toolsrv_wire::NOFID,
        uname: "h".into(),
        aname: String::new(),
    });
    h.open(1, &format!("proc/{pid}/out"), OREAD);
    let mut buf = Vec::new();
    for tag in 1..=400u16 {
        encode(
            &Frame {
                tag,
                body: Body::Tread {
                    fid: 1,
                    offset: 0,
                    count: 1 << 20,
                },
            },
            &mut buf,
        );
    }
    h.send_bytes(&buf);
    // For two seconds: the server stays small and answers another client.
    let mut peak = 0;
    let start = Instant::now();
    let mut answered = 0;
    while start.elapsed() < Duration::from_secs(2) {
        peak = peak.max(vm_rss_kib(srv.pid()).expect("rss"));
        assert_eq!(ok_text(&call_shell(&mut c, "echo hi")), "hi\n");
        answered += 1;
    }
    let grew = peak.saturating_sub(rss0);
    eprintln!("400 unread 1 MiB reads: RSS {rss0} KiB -> peak {peak} KiB (+{grew} KiB); {answered} calls answered meanwhile");
    assert!(grew < 256 * 1024, "RSS grew by {grew} KiB");
    // As the peer reads, the server resumes: every reply arrives, whole.
    patient(&mut h, Duration::from_secs(60));
    for _ in 0..400 {
        match h.recv().body {
            Body::Rread { data } => assert_eq!(data.len(), (1 << 20) - 11),
            b => panic!("{b:?}"),
        }
    }
    assert!(!h.read_file("info").is_empty());
}

#[test]
fn finished_runs_keep_the_server_under_the_output_budget() {
    // The documented default: 128 MiB of output kept by finished processes.
    let (srv, mut c) = shell_session(&[]);
    finished_bg(&mut c, 1 << 20);
    let rss0 = vm_rss_kib(srv.pid()).expect("rss");
    let mut pids = Vec::new();
    let mut peak = 0;
    for _ in 0..40 {
        pids.push(finished_bg(&mut c, 8 << 20));
        peak = peak.max(vm_rss_kib(srv.pid()).expect("rss"));
    }
    let grew = peak.saturating_sub(rss0);
    eprintln!("40 finished 8 MiB runs: RSS {rss0} KiB -> peak {peak} KiB (+{grew} KiB)");
    assert!(grew < 128 * 1024, "RSS grew by {grew} KiB");
    // The oldest were dismissed, the newest kept.
    let listed: Vec<u64> = list(&mut c, None)
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    assert!(!listed.contains(&pids[0]), "{listed:?}");
    assert!(listed.contains(&pids[39]), "{listed:?}");
    assert!(listed.len() <= 17, "{listed:?}");
}

#[test]
fn a_sync_calls_entry_goes_once_its_result_was_read_and_its_fid_clunked() {
    let (_srv, mut c) = shell_session(&[]);
    ok_text(&call_shell(&mut c, "echo one"));
    assert_eq!(list(&mut c, Some("a1")), Vec::<serde_json::Value>::new());
    // A call whose proc/<pid>/out is open elsewhere stays until that closes.
    let fid = 30;
    c.walk(fid, "proc/new").expect("walk");
    c.ok(Body::Topen { fid, mode: ORDWR });
    c.ok(Body::Twrite {
        fid,
        offset: 0,
        data: payload(&[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", "sleep 0.5; echo two"),
        ])
        .into_bytes(),
    });
    let tag = c.send_read(fid, 60000);
    let mut other = Raw::connect(&_srv.socket);
    other.version(65536);
    other.ok(Body::Tattach {
        fid: 0,
        afid: toolsrv_wire::NOFID,
        uname: "o".into(),
        aname: String::new(),
    });
    let mut pid = None;
    assert!(wait_until(WAIT, || {
        pid = list(&mut other, Some("a1"))
            .first()
            .and_then(|p| p["pid"].as_u64());
        pid.is_some()
    }));
    let pid = pid.expect("pid");
    other.open(5, &format!("proc/{pid}/out"), OREAD);
    let f = c.recv();
    assert_eq!(f.tag, tag);
    match f.body {
        Body::Rread { data } => assert!(String::from_utf8_lossy(&data).contains("two")),
        b => panic!("{b:?}"),
    }
    c.ok(Body::Tclunk { fid });
    assert_eq!(list(&mut c, Some("a1")).len(), 1, "kept while out is open");
    other.ok(Body::Tclunk { fid: 5 });
    assert_eq!(list(&mut c, Some("a1")), Vec::<serde_json::Value>::new());
}

#[test]
fn background_processes_per_agent_are_capped_with_a_clear_error() {
    let (_srv, mut c) = shell_session(&["--max-background", "2"]);
    let sleep = [("tool", "shell"), ("agent", "a1"), ("command", "sleep 30")];
    let p1 = bg(&mut c, &sleep).expect("first");
    bg(&mut c, &sleep).expect("second");
    let e = bg(&mut c, &sleep).expect_err("third");
    assert!(
        e.contains("\"a1\"") && e.contains("2 background processes running"),
        "{e}"
    );
    // Another agent is not affected; and once one ends there is room again.
    load(&mut c, "a2", "shell");
    bg(
        &mut c,
        &[("tool", "shell"), ("agent", "a2"), ("command", "true")],
    )
    .expect("a2");
    c.write(&format!("proc/{p1}/ctl"), "kill").expect("kill");
    assert!(wait_until(WAIT, || bg(&mut c, &sleep).is_ok()));
}

#[test]
fn request_data_is_bounded_per_connection_not_only_per_fid() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    c.version(1 << 20);
    c.ok(Body::Tattach {
        fid: 0,
        afid: toolsrv_wire::NOFID,
        uname: "t".into(),
        aname: String::new(),
    });
    let chunk = vec![b'x'; 1 << 19];
    for fid in [1u32, 2] {
        c.open(fid, "proc/new", ORDWR);
        for k in 0..32u64 {
            c.ok(Body::Twrite {
                fid,
                offset: k << 19,
                data: chunk.clone(),
            });
        }
    }
    c.open(3, "proc/new", ORDWR);
    let e = c.err(Body::Twrite {
        fid: 3,
        offset: 0,
        data: b"tool=shell".to_vec(),
    });
    assert!(e.starts_with("request too large"), "{e}");
    // Clunking a fid gives its bytes back.
    c.ok(Body::Tclunk { fid: 1 });
    c.ok(Body::Twrite {
        fid: 3,
        offset: 0,
        data: b"tool=shell".to_vec(),
    });
}

/// `toolsrv serve --secret-file <file>` on a fresh socket; the child.
fn serve_with_secret_file(file: &std::path::Path) -> (tempfile::TempDir, std::process::Child) {
    let run = tempfile::tempdir().expect("tempdir");
    let child = Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(run.path().join("s.sock"))
        .arg("--cwd")
        .arg(run.path())
        .arg("--secret-file")
        .arg(file)
        .env("OLLIE_CFG_PATH", run.path().join("cfg"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    (run, child)
}

#[test]
fn a_secret_file_readable_by_others_or_owned_by_another_uid_stops_startup() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("secret");
    std::fs::write(&f, "pinned\n").expect("write");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (_run, child) = serve_with_secret_file(&f);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&f.display().to_string()) && err.contains("0644"),
        "{err}"
    );
    // Safety: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::chown(&f, Some(12345), None).expect("chown");
        let (_run, child) = serve_with_secret_file(&f);
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("owned by uid 12345"), "{err}");
    }
}

#[test]
fn a_pinned_secret_is_the_only_one_accepted_even_for_the_first_client() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("secret");
    std::fs::write(&f, "  pinned-secret\n").expect("write");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let f = f.to_str().expect("utf8").to_string();
    let srv = Server::start(&["--secret-file", &f]);
    let mut first = srv.raw();
    assert_eq!(
        first.authenticate("squatter").unwrap_err(),
        "authentication failed"
    );
    let (mut c, token) = srv.authed("pinned-secret");
    assert_eq!(token.len(), 64);
    assert!(!c.read_file("info").is_empty());
    let (_c2, token2) = srv.authed("pinned-secret");
    assert_eq!(token, token2);
}

/// `CAP_SYS_RESOURCE`, which lets root raise its hard descriptor limit.
const CAP_SYS_RESOURCE: libc::c_ulong = 24;

/// A `--no-auth` server whose hard descriptor limit is `hard` and which may
/// not raise it: `CAP_SYS_RESOURCE` is dropped from its bounding set, so
/// root's capabilities after `execve` lack it.
fn server_with_hard_nofile(hard: u64) -> Server {
    Launch::new()
        .arg("--no-auth")
        .tweak(move |cmd| {
            // Safety: only async-signal-safe calls (prctl, setrlimit) between
            // fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let l = libc::rlimit {
                        rlim_cur: hard,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .start()
}

/// Attack: exhaust the server's descriptors (not its connection count) with
/// running tools, then keep connecting. Expected: the server neither spins
/// nor leaves connections hanging in the backlog; it closes them at once
/// (the reserve descriptor makes room to accept and close), says so in its
/// log at most once a minute, and serves again as soon as descriptors are
/// free.
#[test]
fn out_of_descriptors_new_connections_are_shed_and_served_again_once_free() {
    let srv = server_with_hard_nofile(700);
    assert!(
        srv.log_text().contains("serving fewer connections"),
        "the hard limit was raised after all:\n{}",
        tail(&srv.log_text())
    );
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    // Background tools until their runs fail for want of descriptors: each
    // running one holds its pipe, pidfd and group descriptors.
    let pids: Vec<u64> = (0..700)
        .map(|_| {
            bg(
                &mut c,
                &[("tool", "shell"), ("agent", "a1"), ("command", "sleep 60")],
            )
            .expect("bg")
        })
        .collect();
    let last = pids[pids.len() - 1];
    assert_eq!(final_stat(&mut c, last)["state"], "failed");
    let why = String::from_utf8_lossy(&c.read_file(&format!("proc/{last}/out"))).into_owned();
    assert!(why.contains("Too many open files"), "{why}");
    // Take what descriptors are left with idle connections until accept
    // itself runs out.
    let mut idle = Vec::new();
    let mut shed = 0;
    for _ in 0..64 {
        let s = std::os::unix::net::UnixStream::connect(&srv.socket).expect("connect");
        // Short: the 64 connections must all be taken well within the auth
        // timeout (10 s), which closes idle ones and frees their descriptors.
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let mut b = [0u8; 1];
        let mut probe = &s;
        // A shed connection is closed by the server at once: EOF.
        if matches!(std::io::Read::read(&mut probe, &mut b), Ok(0)) {
            shed += 1;
            if shed >= 3 {
                break;
            }
        } else {
            idle.push(s);
        }
    }
    let log = srv.log_text();
    assert!(shed >= 3, "no connection was shed; log:\n{}", tail(&log));
    assert!(
        log.contains("descriptor limit reached"),
        "the shedding was not logged:\n{}",
        tail(&log)
    );
    assert!(refusal_lines(&log) <= 3, "{}", tail(&log));
    // Free the descriptors: end the tools and drop the idle connections.
    drop(idle);
    for pid in &pids {
        let _ = c.write(&format!("proc/{pid}/ctl"), "kill");
    }
    assert!(
        wait_until(Duration::from_secs(20), || try_versioned(&srv).is_some()),
        "not served again after the descriptors were freed; log:\n{}",
        tail(&srv.log_text())
    );
    let r = call_shell(&mut c, "echo served");
    assert_eq!(ok_text(&r), "served\n");
}

/// Issue 23, hole 5: 1,020 connections that never attach, each announcing a
/// 1 MiB frame after its `Tversion` (half of them a frame just under the
/// pre-attach limit, sent in part), keep the server's memory growth under
/// 64 MiB, and what grew is given back once they close.
#[test]
fn pre_auth_connections_announcing_large_frames_do_not_grow_the_server() {
    const CONNS: usize = 1020;
    let srv = Launch::new().start();
    let pid = srv.pid();
    // A first client, so the baseline includes a served connection.
    drop(try_versioned(&srv).expect("versioned"));
    let base = vm_rss_kib(pid).unwrap_or(0);
    let mut conns = Vec::with_capacity(CONNS);
    for i in 0..CONNS {
        let Some(mut r) = try_versioned_with(&srv, 1 << 20) else {
            panic!(
                "connection {i} was not served; log:\n{}",
                tail(&srv.log_text())
            );
        };
        // A Twrite header announcing its size; only the first bytes follow.
        let size: u32 = if i % 2 == 0 { 1 << 20 } else { 8000 };
        let mut head = size.to_le_bytes().to_vec();
        head.extend_from_slice(&[118, 1, 0]);
        head.extend_from_slice(&[0u8; 100]);
        r.s.write_all(&head).expect("write the frame's start");
        conns.push(r);
    }
    // The server has read what was sent once it answered a later client.
    drop(try_versioned(&srv).expect("versioned after the flood"));
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    let grew_mib = peak.saturating_sub(base) / 1024;
    drop(conns);
    let returned = wait_until(Duration::from_secs(10), || {
        vm_rss_kib(pid).unwrap_or(0).saturating_sub(base) < 16 << 10
    });
    let after = vm_rss_kib(pid).unwrap_or(0);
    eprintln!(
        "VmRSS: {base} KiB before, {peak} KiB at the peak with {CONNS} pre-attach connections, {after} KiB after they closed"
    );
    assert!(grew_mib < 64, "the server grew by {grew_mib} MiB");
    assert!(
        returned,
        "the server kept {} MiB after the connections closed",
        after.saturating_sub(base) / 1024
    );
}

/// A client command against `srv` (its default secret file), bounded in
/// time: whether it succeeded, and its output.
fn cli(srv: &Server, args: &[&str]) -> (bool, String) {
    let mut child = Command::new(toolsrv_bin())
        .current_dir(srv.cwd())
        .arg("--socket")
        .arg(&srv.socket)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the client");
    let mut status = None;
    wait_until(Duration::from_secs(20), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("client output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (status.is_some_and(|s| s.success()), text)
}

/// A tool that holds as many connections to `socket` as it can, up to 1,100
/// (two processes of 550), opening a new one for each the server closes (at
/// most 50 per round of 50 ms), for at most 120 s. Each process records how
/// many connections it opened in `w/flood.<pid>`.
fn flood_tool(socket: &std::path::Path) -> String {
    let script = "import os, socket, sys, time, select\n\
        path = sys.argv[1]\n\
        os.fork()\n\
        socks = {}\n\
        p = select.poll()\n\
        opened = 0\n\
        end = time.time() + 120\n\
        while time.time() < end:\n\
        \x20   fresh = 0\n\
        \x20   while len(socks) < 550 and fresh < 50:\n\
        \x20       s = socket.socket(socket.AF_UNIX)\n\
        \x20       try:\n\
        \x20           s.connect(path)\n\
        \x20       except OSError:\n\
        \x20           s.close(); break\n\
        \x20       socks[s.fileno()] = s; p.register(s, select.POLLIN); opened += 1; fresh += 1\n\
        \x20   for fd, ev in p.poll(50):\n\
        \x20       p.unregister(fd); socks.pop(fd).close()\n\
        \x20   tmp = \"w/flood.%d.tmp\" % os.getpid()\n\
        \x20   open(tmp, \"w\").write(str(opened))\n\
        \x20   os.rename(tmp, \"w/flood.%d\" % os.getpid())\n\
        \x20   time.sleep(0.05)\n";
    format!("exec /usr/bin/python3 -c '{script}' {}", socket.display())
}

/// Connections the flood of [`flood_tool`] opened so far, over its processes.
fn flood_opened(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("w"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.starts_with("flood.") && !n.ends_with(".tmp")
                })
                .filter_map(|e| {
                    std::fs::read_to_string(e.path())
                        .ok()?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Issue 23, hole 4: a background tool holding 1,100 connections to its own
/// server (reopening each one the server closes) does not lock the human
/// out: `call`, `approve` of a bypass request and `kill` of the flood itself
/// all work while it runs. The server runs without the filesystem view
/// (`TOOLSRV_VIEW=off`, the Landlock-only fallback), where a confined tool can
/// still reach its server's socket: with the view the socket is masked and the
/// flood cannot even start (`sandbox_view::a_tool_cannot_connect_to_its_own_servers_socket`).
#[test]
fn a_tool_flooding_the_socket_leaves_the_humans_call_kill_and_approve_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().to_path_buf();
    std::fs::create_dir(cwd.join("w")).expect("w");
    let srv = Launch::new()
        .env("TOOLSRV_VIEW", "off")
        .cwd_dir(dir)
        .listen(&cwd.join("toolsrv.sock"))
        .start();
    let (ok, out) = cli(&srv, &["load", "a1", "shell"]);
    assert!(ok, "load: {out}");
    let command = format!("command={}", flood_tool(&srv.socket));
    let (ok, flood) = cli(&srv, &["bg", "--agent", "a1", "shell", &command]);
    assert!(ok, "bg: {flood}");
    let flood = flood.lines().next().unwrap_or_default().trim().to_string();
    let in_place = wait_until(Duration::from_secs(30), || flood_opened(&cwd) >= 1100);
    assert!(
        in_place,
        "the flood opened only {} connections; log:\n{}",
        flood_opened(&cwd),
        tail(&srv.log_text())
    );
    let mut served = 0;
    for i in 0..5 {
        let (ok, out) = cli(
            &srv,
            &[
                "call",
                "--agent",
                "a1",
                "shell",
                &format!("command=echo served {i}"),
            ],
        );
        if ok && out.contains(&format!("served {i}")) {
            served += 1;
        } else {
            eprintln!("call {i}: {out}");
        }
    }
    let (ok, bypass) = cli(
        &srv,
        &[
            "bg",
            "--bypass",
            "--agent",
            "a1",
            "shell",
            "command=echo bypassed",
        ],
    );
    let bypass = bypass.lines().next().unwrap_or_default().trim().to_string();
    let mut id = None;
    if ok {
        wait_until(WAIT, || {
            let (_, pending) = cli(&srv, &["pending", "--json"]);
            id = pending.lines().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                Some(v["id"].as_str()?.to_string())
            });
            id.is_some()
        });
    }
    let approved = id
        .as_deref()
        .is_some_and(|id| cli(&srv, &["approve", id]).0);
    let ran = approved && wait_until(WAIT, || cli(&srv, &["out", &bypass]).1.contains("bypassed"));
    let (killed, kill_out) = cli(&srv, &["kill", &flood]);
    let log = tail(&srv.log_text());
    assert_eq!(
        served, 5,
        "{served} of 5 calls were served during the flood; log:\n{log}"
    );
    assert!(
        approved,
        "the bypass request could not be approved (bg: {bypass}); log:\n{log}"
    );
    assert!(ran, "the approved run did not run; log:\n{log}");
    assert!(killed, "kill of the flood failed: {kill_out}; log:\n{log}");
}

/// Issue 23, hole 6: the server's runtime workers carry the confined runs'
/// seccomp filter once they started a confined tool, and that filter answers
/// `openat2` with `ENOSYS`. The server's own lookups on those threads must
/// not conclude that the kernel has no `openat2` and fall back, for the whole
/// process, to a walk that refuses symbolic links: a `cwd` reached through a
/// relative link that stays inside `--cwd` keeps working, call after call.
#[test]
fn a_symlinked_cwd_keeps_working_after_confined_calls() {
    let srv = Launch::new().arg("--no-auth").start();
    let root = srv.cwd().to_path_buf();
    std::fs::create_dir_all(root.join("real/sub")).expect("real/sub");
    std::os::unix::fs::symlink("real", root.join("link")).expect("link");
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    let want = std::fs::canonicalize(root.join("real/sub")).expect("canonical");
    for i in 0..6 {
        // Confined calls first, so every worker carries the filter.
        let r = call_shell(&mut c, "true");
        assert_eq!(r["isError"], false, "call {i}: {r}");
        let r = call(
            &mut c,
            &[
                ("tool", "shell"),
                ("agent", "a1"),
                ("cwd", "link/sub"),
                ("command", "pwd -P"),
            ],
        );
        assert_eq!(r["isError"], false, "call {i} in link/sub: {r}");
        assert_eq!(ok_text(&r).trim(), want.display().to_string(), "call {i}");
    }
}

/// Issue 23, hole 6: the `--log` file is created mode 0600 and is one of the
/// server's protected files: a tool whose writable rule covers it can
/// neither read it nor write it.
#[test]
fn the_log_file_is_private_and_out_of_the_tools_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().to_path_buf();
    std::fs::create_dir(cwd.join("w")).expect("w");
    let log = cwd.join("w/server.log");
    let srv = Launch::new()
        .arg("--no-auth")
        .cwd_dir(dir)
        .log(&log)
        .start();
    let mode = std::fs::metadata(&log).expect("log").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the log file's mode is {mode:o}");
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    let r = call_shell(
        &mut c,
        "echo forged >> w/server.log; grep -c 'toolsrv serving' w/server.log; true",
    );
    let text = ok_text(&r);
    assert!(
        !std::fs::read_to_string(&log)
            .expect("log")
            .contains("forged"),
        "a tool wrote into the log"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.trim().parse::<u32>().is_ok_and(|n| n > 0)),
        "a tool read the log: {text}"
    );
}
