//! The client library against the real `toolsrv serve`.
//!
//! The binary is `<target dir>/debug/toolsrv`, found from this test's own path
//! (`<target dir>/debug/deps/<test>`); if it is missing it is built first with
//! `cargo build -p toolsrv`.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::support::{bounded, until};
use toolsrv_client::{Auth, Body, Client, ClientError};
use toolsrv_testkit::Server;
use toolsrv_wire::{DMDIR, OREAD};

async fn connect(s: &Server) -> Client {
    Client::connect(&s.socket, Auth::None)
        .await
        .expect("connect")
}

/// Poll `fut` once (so its request is sent) and report whether it was still pending.
async fn poll_once<F: Future>(fut: F) -> bool {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_of_info_returns_platform_json() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    assert_eq!(c.token(), None);
    assert_eq!(c.msize(), 1 << 20);
    let data = bounded(c.read_file("info")).await.expect("read info");
    let v: serde_json::Value = serde_json::from_slice(&data).expect("info is JSON");
    assert_eq!(v["platform"], "linux");
    assert!(v["arch"].is_string(), "{v}");
    // The background clunk's reply releases the fid: only the root fid is left.
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dir_of_root_shows_the_namespace() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let entries = bounded(c.list_dir("/")).await.expect("list /");
    let mut names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "all",
            "bypass",
            "ctl",
            "doctor",
            "info",
            "proc",
            "tools",
            "tools_rev"
        ]
    );
    for e in &entries {
        let expected = match e.name.as_str() {
            "bypass" | "proc" => DMDIR | 0o555,
            "ctl" => 0o200,
            "all" | "info" | "doctor" => 0o444,
            _ => 0o600,
        };
        assert_eq!(e.mode, expected, "mode of {}", e.name);
    }
    let proc_entries = bounded(c.list_dir("proc")).await.expect("list proc");
    assert!(proc_entries.iter().any(|e| e.name == "new.bg"));
    // list_dir clunks without waiting; the replies release the fids.
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_names_the_file() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let st = bounded(c.stat("info")).await.expect("stat info");
    assert_eq!(st.name, "info");
    assert_eq!(st.mode, 0o444);
    let root = bounded(c.stat("")).await.expect("stat root");
    assert_eq!(root.mode & DMDIR, DMDIR);
    assert_eq!(c.fids_in_use(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_read_files_share_one_connection() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let expected = bounded(c.read_file("info")).await.expect("read info");
    let mut set = tokio::task::JoinSet::new();
    for i in 0..64 {
        let c = c.clone();
        set.spawn(async move {
            let path = if i % 2 == 0 { "info" } else { "/info" };
            c.read_file(path).await
        });
    }
    let mut n = 0;
    while let Some(r) = bounded(set.join_next()).await {
        assert_eq!(r.expect("task").expect("read"), expected);
        n += 1;
    }
    assert_eq!(n, 64);
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_the_server_text_and_release_fids() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let e = bounded(c.read_file("nope"))
        .await
        .expect_err("missing file");
    assert!(matches!(e, ClientError::Server(_)), "{e:?}");
    assert_eq!(e.to_string(), "file not found");
    // A walk that stops part-way (Rwalk with fewer qids).
    let e = bounded(c.read_file("proc/nope"))
        .await
        .expect_err("missing");
    assert_eq!(e.to_string(), "file not found: proc/nope");
    let e = bounded(c.write_file("info", b"x")).await.expect_err("0444");
    assert_eq!(e.to_string(), "permission denied");
    let e = bounded(c.open("ctl", OREAD)).await.expect_err("0200");
    assert_eq!(e.to_string(), "permission denied");
    let e = bounded(c.stat("nope/deeper")).await.expect_err("missing");
    assert_eq!(e.to_string(), "file not found");
    // Every failed call's fid is clunked in the background; wait for the replies.
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_longer_than_16_elements_are_walked_in_chunks() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let expected = bounded(c.read_file("info")).await.expect("read info");
    // 2 × 10 + 1 = 21 elements.
    let path = format!("{}info", "proc/../".repeat(10));
    assert_eq!(
        bounded(c.read_file(&path)).await.expect("long path"),
        expected
    );
    let f = bounded(c.open(&path, OREAD)).await.expect("open long path");
    assert_eq!(bounded(f.read_to_end()).await.expect("read"), expected);
    bounded(f.clunk()).await.expect("clunk");
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_file_reads_at_offsets() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let whole = bounded(c.read_file("info")).await.expect("read info");
    let f = bounded(c.open("info", OREAD)).await.expect("open");
    assert!(f.iounit() > 0 && f.iounit() <= c.msize() - 24);
    let part = bounded(f.read_at(2, 5)).await.expect("read_at");
    assert_eq!(part, whole[2..7]);
    let past = bounded(f.read_at(whole.len() as u64, 100))
        .await
        .expect("read past end");
    assert!(past.is_empty());
    let e = bounded(f.write_at(0, b"x"))
        .await
        .expect_err("opened OREAD");
    assert!(matches!(e, ClientError::Server(_)), "{e:?}");
    bounded(f.clunk()).await.expect("clunk");
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_blocked_read_flushes_it_and_dropping_the_file_clunks_it() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    // No server comes back here: fail at once instead of trying to reconnect.
    c.set_reconnect_timeout(Duration::ZERO);
    let f = bounded(c.open("bypass/pending", OREAD))
        .await
        .expect("open pending");
    assert_eq!(c.fids_in_use(), 2);
    // The read blocks on the server; poll it once so the Tread goes out, then drop it.
    assert!(
        poll_once(f.read_at(0, 4096)).await,
        "pending read completed"
    );
    // Its tag is released only by the Rflush, which proves the Tflush went out.
    until(|| c.outstanding_requests() == 0).await;
    // The connection is still usable.
    assert!(!bounded(c.read_file("info")).await.expect("read").is_empty());
    drop(f);
    // The fire-and-forget Tclunk was answered.
    until(|| c.fids_in_use() == 1).await;
    assert_eq!(c.outstanding_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_future_cancels_its_read_and_fid() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let c2 = c.clone();
    let call = async move {
        let f = c2.open("bypass/pending", OREAD).await?;
        f.read_to_end().await
    };
    let task = tokio::spawn(call);
    // Wait until the open succeeded and the read is outstanding.
    until(|| c.fids_in_use() == 2 && c.outstanding_requests() == 1).await;
    task.abort();
    assert!(bounded(task).await.expect_err("aborted").is_cancelled());
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_fails_waiting_and_later_requests_with_disconnected() {
    let mut s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    // No server comes back here: fail at once instead of trying to reconnect.
    c.set_reconnect_timeout(Duration::ZERO);
    let f = bounded(c.open("bypass/pending", OREAD))
        .await
        .expect("open");
    let c2 = c.clone();
    let reader = tokio::spawn(async move {
        let r = f.read_at(0, 100).await;
        drop(c2);
        r
    });
    until(|| c.outstanding_requests() == 1).await;
    s.kill();
    let r = bounded(reader).await.expect("task");
    assert!(matches!(r, Err(ClientError::Disconnected)), "{r:?}");
    let r = bounded(c.read_file("info")).await;
    assert!(matches!(r, Err(ClientError::Disconnected)), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_returns_the_raw_reply() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let r = bounded(c.rpc(Body::Tclunk { fid: 0xdead_beef }))
        .await
        .expect("rpc");
    match r {
        Body::Rerror { ename } => assert!(ename.contains("3735928559"), "{ename}"),
        other => panic!("expected Rerror, got {other:?}"),
    }
    assert_eq!(c.root_fid(), 0);
    match bounded(c.rpc(Body::Tstat { fid: c.root_fid() }))
        .await
        .expect("rpc")
    {
        Body::Rstat { stat } => assert_eq!(stat.mode & DMDIR, DMDIR),
        other => panic!("expected Rstat, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_auth_gives_a_stable_token_and_rejects_other_secrets() {
    let s = Server::start(&[]);
    let a = bounded(Client::connect(&s.socket, Auth::Secret("s3cret".into())))
        .await
        .expect("first connect");
    let token = a.token().expect("token").to_owned();
    assert_eq!(token.len(), 64);
    assert!(token
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    let b = bounded(Client::connect(&s.socket, Auth::Secret("s3cret".into())))
        .await
        .expect("second connect");
    assert_eq!(b.token().as_deref(), Some(&*token));
    assert!(!bounded(b.read_file("info")).await.expect("read").is_empty());
    let e = bounded(Client::connect(&s.socket, Auth::Secret("other".into())))
        .await
        .expect_err("wrong secret");
    assert!(matches!(e, ClientError::Auth(_)), "{e:?}");
    assert_eq!(e.to_string(), "authentication failed");
    let e = bounded(Client::connect(&s.socket, Auth::None))
        .await
        .expect_err("no auth");
    assert_eq!(e.to_string(), "authentication required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_against_a_no_auth_server_falls_back_to_anonymous_attach() {
    let s = Server::start(&["--no-auth"]);
    let c = bounded(Client::connect(&s.socket, Auth::Secret("x".into())))
        .await
        .expect("connect");
    assert_eq!(c.token(), None);
    assert!(!bounded(c.read_file("info")).await.expect("read").is_empty());
    // The never-created afid's number was released by its clunk's reply.
    until(|| c.fids_in_use() == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolved_secret_file_authenticates() {
    let s = Server::start(&[]);
    let secret = toolsrv_client::resolve_secret(&s.socket, None).expect("generate");
    let generated = toolsrv_client::secret::generated_secret_path(&s.socket).expect("user dir");
    assert!(generated.exists(), "{}", generated.display());
    assert!(!toolsrv_client::secret::default_secret_path(&s.socket).exists());
    let c = bounded(Client::connect(&s.socket, Auth::Secret(secret)))
        .await
        .expect("connect");
    assert!(c.token().is_some());
}

/// The names in the JSON array of `all`.
fn tool_names(all: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(all).expect("all is JSON");
    v.as_array()
        .expect("all is an array")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_of_a_file_answered_asynchronously() {
    // `all` runs discovery before answering: the read is not answered inline,
    // so a clunk pipelined behind it would cancel it.
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let all = bounded(c.read_file("all")).await.expect("read all");
    assert!(!tool_names(&all).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_msize_splits_reads_of_files_and_directories() {
    let s = Server::start(&["--no-auth"]);
    let big = connect(&s).await;
    let small = bounded(Client::connect_with_msize(&s.socket, Auth::None, 256))
        .await
        .expect("connect msize 256");
    assert_eq!(small.msize(), 256);
    let all = bounded(big.read_file("all")).await.expect("read all");
    assert!(
        all.len() > 2 * (256 - 24),
        "all is only {} bytes",
        all.len()
    );
    assert_eq!(
        bounded(small.read_file("all")).await.expect("read all"),
        all
    );
    let f = bounded(small.open("all", OREAD)).await.expect("open all");
    assert_eq!(bounded(f.read_to_end()).await.expect("read_to_end"), all);
    drop(f);
    let names = |v: Vec<toolsrv_client::Stat>| v.into_iter().map(|e| e.name).collect::<Vec<_>>();
    let listing = names(bounded(big.list_dir("/")).await.expect("list"));
    assert_eq!(
        names(bounded(small.list_dir("/")).await.expect("list")),
        listing
    );
    let e = Client::connect_with_msize(&s.socket, Auth::None, 100)
        .await
        .expect_err("msize below 256");
    assert!(e.to_string().contains("100"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_file_and_transact_drive_the_registry() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    let all = tool_names(&bounded(c.read_file("all")).await.expect("read all"));
    let tool = &all[0];
    assert_eq!(
        bounded(c.transact("tools_rev", b"a1")).await.expect("rev"),
        b"0"
    );
    assert_eq!(
        bounded(c.transact("tools", b"a1\n")).await.expect("tools"),
        b"[]"
    );
    bounded(c.write_file("ctl", format!("load a1 {tool}").as_bytes()))
        .await
        .expect("load");
    let tools = bounded(c.transact("tools", b"a1")).await.expect("tools");
    assert_eq!(tool_names(&tools), vec![tool.clone()]);
    assert_eq!(
        bounded(c.transact("tools_rev", b"a1")).await.expect("rev"),
        b"1"
    );
    let e = bounded(c.write_file("ctl", b"load a1 no-such-tool"))
        .await
        .expect_err("unknown tool");
    assert_eq!(e.to_string(), "unknown tool \"no-such-tool\"");
    let e = bounded(c.transact("tools", b""))
        .await
        .expect_err("no agent");
    assert_eq!(e.to_string(), "write an agent ID first");
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_requests_are_written_in_msize_chunks() {
    let s = Server::start(&["--no-auth"]);
    let c = bounded(Client::connect_with_msize(&s.socket, Auth::None, 256))
        .await
        .expect("connect");
    // A 600-byte agent ID travels in three Twrites at offsets 0, 232, 464;
    // every chunk is accepted and the first read evaluates the whole (too
    // long) request.
    let id = vec![b'a'; 600];
    let e = bounded(c.transact("tools_rev", &id))
        .await
        .expect_err("too long");
    assert!(e.to_string().contains("invalid agent ID"), "{e}");
    // The longest valid ID (128 bytes) plus its newline fits one write.
    let mut ok = vec![b'b'; 128];
    ok.push(b'\n');
    assert_eq!(
        bounded(c.transact("tools_rev", &ok)).await.expect("rev"),
        b"0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_fits_one_read_costs_one_read() {
    let s = Server::start(&["--no-auth"]);
    let c = connect(&s).await;
    bounded(c.transact("tools_rev", b"a1"))
        .await
        .expect("warm up");
    let before = c.requests_sent();
    assert_eq!(
        bounded(c.transact("tools_rev", b"a1")).await.expect("rev"),
        b"0"
    );
    // Twalk, Topen, Twrite, Tread, Tclunk: the short first read ends the
    // response, no second read for 0 bytes.
    assert_eq!(c.requests_sent() - before, 5);
    until(|| c.fids_in_use() == 1 && c.outstanding_requests() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_longer_than_msize_is_read_whole() {
    let s = Server::start(&["--no-auth"]);
    let big = connect(&s).await;
    let small = bounded(Client::connect_with_msize(&s.socket, Auth::None, 256))
        .await
        .expect("connect msize 256");
    let all = tool_names(&bounded(big.read_file("all")).await.expect("read all"));
    let load: Vec<String> = all.iter().map(|t| format!("load a1 {t}")).collect();
    bounded(big.write_file("ctl", load.join("\n").as_bytes()))
        .await
        .expect("load");
    let listing = bounded(big.transact("tools", b"a1")).await.expect("tools");
    let reads = listing.len().div_ceil(256 - 24);
    assert!(reads >= 3, "tools of a1 is only {} bytes", listing.len());
    let before = small.requests_sent();
    assert_eq!(
        bounded(small.transact("tools", b"a1"))
            .await
            .expect("tools"),
        listing
    );
    // Walk, open, write, clunk and one read per 232 bytes; one more read
    // only when the last full read ended exactly at the end.
    let sent = small.requests_sent() - before;
    let exact = u64::from(listing.len() % (256 - 24) == 0);
    assert_eq!(sent, 4 + reads as u64 + exact, "{} bytes", listing.len());
}
