//! Walks of the namespace (docs/protocol.md, "Namespace"; docs/protocol.md, "Processes"): every root entry, the files of
//! `proc/<pid>`, and the errors of walks and opens.

use toolsrv_wire::{Body, DMDIR, OREAD, OWRITE};

use super::support::{bounded, Harness, ECHO, SH};

const ROOT: [&str; 8] = [
    "all",
    "bypass",
    "ctl",
    "doctor",
    "info",
    "proc",
    "tools",
    "tools_rev",
];

#[tokio::test]
async fn the_root_lists_every_entry_with_its_mode() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let entries = c.list_dir("").await.expect("list /");
        let mut names: Vec<&str> = entries.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ROOT);
        let mode = |n: &str| entries.iter().find(|s| s.name == n).expect(n).mode;
        assert_eq!(mode("ctl"), 0o200);
        assert_eq!(mode("tools"), 0o600);
        assert_eq!(mode("tools_rev"), 0o600);
        assert_eq!(mode("all"), 0o444);
        assert_eq!(mode("info"), 0o444);
        assert_eq!(mode("doctor"), 0o444);
        assert_eq!(mode("bypass"), DMDIR | 0o555);
        assert_eq!(mode("proc"), DMDIR | 0o555);
    })
    .await
}

#[tokio::test]
async fn every_root_entry_walks_and_stats_under_its_own_name() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        for name in ROOT {
            let st = c.stat(name).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(st.name, name);
            assert_eq!(st.uid, &*h.server.user);
        }
    })
    .await
}

#[tokio::test]
async fn qids_are_unique_across_the_tree() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let mut paths: Vec<u64> = Vec::new();
        for dir in ["", "bypass", "proc"] {
            paths.extend(
                c.list_dir(dir)
                    .await
                    .expect("list")
                    .iter()
                    .map(|s| s.qid.path),
            );
        }
        let n = paths.len();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), n, "a qid path repeats");
    })
    .await
}

#[tokio::test]
async fn an_unknown_name_does_not_walk() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let e = c.walk("nonesuch").await.expect_err("walks");
        assert!(e.contains("not found"), "{e}");
        // A longer walk stops at the first missing name.
        let e = c.walk("proc/nonesuch/out").await.expect_err("walks");
        assert!(e.contains("walked 1 of 3"), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_walk_below_a_file_fails() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        assert!(c.walk("info/more").await.is_err());
    })
    .await
}

#[tokio::test]
async fn info_names_the_platform_and_arch_in_gos_words() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let info: serde_json::Value =
            serde_json::from_str(&c.read_file("info").await.expect("info")).expect("JSON");
        assert_eq!(info["platform"], "linux");
        let arch = info["arch"].as_str().expect("arch");
        assert!(
            ["amd64", "arm64", "386", "arm", "riscv64"].contains(&arch),
            "{arch}"
        );
    })
    .await
}

#[tokio::test]
async fn doctor_is_a_json_report() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let text = c.read_file("doctor").await.expect("doctor");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        // A running server reports about itself, under the server's facts.
        assert_eq!(v["source"], "server", "{text}");
        assert!(
            v["landlock"].is_object() && v["containment"].is_object(),
            "{text}"
        );
    })
    .await
}

#[tokio::test]
async fn all_lists_the_tools_sorted_with_their_descriptions() {
    bounded(async {
        let h = Harness::yolo(&[SH, ECHO]);
        let mut c = h.connect().await;
        let all: serde_json::Value =
            serde_json::from_str(&c.read_file("all").await.expect("all")).expect("JSON");
        let names: Vec<&str> = all
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["echo", "sh"]);
        assert_eq!(all[0]["description"], "Print a text");
    })
    .await
}

/// docs/protocol.md, "Namespace" (which supersedes the "skipped from `all`" of section 1):
/// the broken file is listed with an empty description and its error, and
/// `load` of it fails with the same reason.
#[tokio::test]
async fn all_lists_a_broken_tool_file_with_its_error_and_load_names_its_reason() {
    bounded(async {
        let h = Harness::yolo(&[
            ECHO,
            (
                "bad.yaml",
                "description: x\nbogus_key: 1\ncommand: \"true\"\n",
            ),
        ]);
        let mut c = h.connect().await;
        let all = c.read_file("all").await.expect("all");
        let all: serde_json::Value = serde_json::from_str(&all).expect("JSON");
        let bad = &all.as_array().expect("array")[0];
        assert_eq!(bad["name"], "bad", "{all}");
        assert_eq!(bad["description"], "", "{all}");
        let error = bad["error"].as_str().expect("an error string");
        assert!(
            error.contains("bad.yaml") && error.contains("bogus_key"),
            "{error}"
        );
        assert!(
            all[1].get("error").is_none(),
            "a good tool has no error key: {all}"
        );
        let e = c.ctl("load a1 bad").await.expect_err("loads");
        assert!(e.contains(error), "load says {e}, all says {error}");
        assert_eq!(c.rev("a1").await, 0);
    })
    .await
}

#[tokio::test]
async fn all_is_discovered_afresh_on_each_read() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        assert!(!c.read_file("all").await.expect("all").contains("\"sh\""));
        h.write_tool(SH.0, SH.1);
        assert!(c.read_file("all").await.expect("all").contains("\"sh\""));
    })
    .await
}

#[tokio::test]
async fn bypass_holds_pending_and_resolve() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        assert_eq!(c.names("bypass").await, ["pending", "resolve"]);
        let mut got: Vec<(String, u32)> = c
            .list_dir("bypass")
            .await
            .expect("list")
            .into_iter()
            .map(|s| (s.name, s.mode))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("pending".to_string(), 0o444),
                ("resolve".to_string(), 0o200)
            ]
        );
    })
    .await
}

#[tokio::test]
async fn proc_lists_its_fixed_files_then_one_directory_per_process() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        assert_eq!(c.names("proc").await, ["list", "new", "new.bg"]);
        for st in c.list_dir("proc").await.expect("list") {
            assert_eq!(st.mode, 0o600, "{}", st.name);
        }
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect("bg");
        assert_eq!(
            c.names("proc").await,
            [pid.to_string().as_str(), "list", "new", "new.bg"]
        );
    })
    .await
}

#[tokio::test]
async fn a_process_directory_holds_out_wait_stat_ctl_and_denials() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect("bg");
        let entries = c.list_dir(&format!("proc/{pid}")).await.expect("list");
        let mut got: Vec<(String, u32)> = entries.into_iter().map(|s| (s.name, s.mode)).collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("ctl".to_string(), 0o200),
                ("denials".to_string(), 0o444),
                ("out".to_string(), 0o444),
                ("stat".to_string(), 0o444),
                ("wait".to_string(), 0o444)
            ]
        );
        assert_eq!(
            c.stat(&format!("proc/{pid}")).await.expect("stat").mode,
            DMDIR | 0o555
        );
    })
    .await
}

#[tokio::test]
async fn proc_stat_has_exactly_the_procstat_keys() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("session", "s1"),
                ("command", "exit 3"),
            ])
            .await
            .expect("bg");
        assert_eq!(c.wait(pid).await.expect("wait"), 3);
        let st = c.proc_stat(pid).await.expect("stat");
        let mut keys: Vec<&str> = st
            .as_object()
            .expect("object")
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "agent",
                "background",
                "command",
                "cwd",
                "ended",
                "exit_code",
                "pid",
                "runtime_ms",
                "sandboxed",
                "session",
                "started",
                "state",
                "tool"
            ]
        );
        assert_eq!(st["pid"], pid);
        assert_eq!(st["state"], "exited");
        assert_eq!(st["exit_code"], 3);
        assert_eq!(st["session"], "s1");
        assert_eq!(st["background"], true);
        assert_eq!(st["sandboxed"], false);
    })
    .await
}

#[tokio::test]
async fn proc_out_holds_the_merged_output_and_wait_the_exit_code() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("command", "echo one; echo two >&2; exit 7"),
            ])
            .await
            .expect("bg");
        assert_eq!(
            c.read_file(&format!("proc/{pid}/wait"))
                .await
                .expect("wait"),
            "7\n"
        );
        assert_eq!(
            c.read_file(&format!("proc/{pid}/out")).await.expect("out"),
            "one\ntwo\n"
        );
    })
    .await
}

#[tokio::test]
async fn unknown_and_non_canonical_pids_do_not_walk() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect("bg");
        assert!(c.walk(&format!("proc/{pid}")).await.is_ok());
        assert!(c.walk(&format!("proc/0{pid}")).await.is_err());
        assert!(c.walk(&format!("proc/+{pid}")).await.is_err());
        assert!(c.walk("proc/999").await.is_err());
        assert!(c.walk(&format!("proc/{pid}/nonesuch")).await.is_err());
    })
    .await
}

#[tokio::test]
async fn opens_that_the_mode_forbids_are_permission_denied() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        for (path, mode) in [
            ("ctl", OREAD),
            ("all", OWRITE),
            ("info", OWRITE),
            ("bypass/resolve", OREAD),
            ("bypass/pending", OWRITE),
        ] {
            let e = c.open(path, mode).await.expect_err(path);
            assert_eq!(e, "permission denied", "{path}");
        }
    })
    .await
}

#[tokio::test]
async fn create_remove_and_wstat_of_a_change_are_refused() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let fid = c.walk("proc").await.expect("walk");
        let r = c
            .rpc(Body::Tcreate {
                fid,
                name: "x".into(),
                perm: 0o644,
                mode: OWRITE,
            })
            .await;
        assert_eq!(
            r,
            Body::Rerror {
                ename: "permission denied".into()
            }
        );
        let fid = c.walk("info").await.expect("walk");
        let r = c.rpc(Body::Tremove { fid }).await;
        assert!(matches!(r, Body::Rerror { .. }), "{r:?}");
    })
    .await
}

#[tokio::test]
async fn reading_tools_or_tools_rev_without_a_write_fails() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        for path in ["tools", "tools_rev"] {
            let fid = c.open(path, toolsrv_wire::ORDWR).await.expect("open");
            let e = c.read_at(fid, 0).await.expect_err("reads");
            assert_eq!(e, "write an agent ID first", "{path}");
            c.clunk(fid).await;
        }
    })
    .await
}

#[tokio::test]
async fn proc_list_lists_all_or_one_agents_processes() {
    bounded(async {
        let h = Harness::yolo(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        c.load("a2", "sh").await;
        let p1 = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect("bg");
        let p2 = c
            .bg(&[("tool", "sh"), ("agent", "a2"), ("command", "true")])
            .await
            .expect("bg");
        let pids = |text: String| -> Vec<u64> {
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            v.as_array()
                .expect("array")
                .iter()
                .map(|p| p["pid"].as_u64().expect("pid"))
                .collect()
        };
        let all = c.read_file("proc/list").await.expect("list");
        assert_eq!(pids(all), [p1, p2]);
        let a2 = c.ask("proc/list", "a2\n").await.expect("list a2");
        assert_eq!(pids(a2), [p2]);
    })
    .await
}

#[tokio::test]
async fn reading_proc_new_or_new_bg_without_a_payload_fails() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        for path in ["proc/new", "proc/new.bg"] {
            let fid = c.open(path, toolsrv_wire::ORDWR).await.expect("open");
            let e = c.read_at(fid, 0).await.expect_err("reads");
            assert_eq!(e, "write a request payload first", "{path}");
            c.clunk(fid).await;
        }
    })
    .await
}

#[tokio::test]
async fn proc_list_refuses_an_invalid_agent_id() {
    bounded(async {
        let h = Harness::yolo(&[]);
        let mut c = h.connect().await;
        let e = c.ask("proc/list", "a/b").await.expect_err("lists");
        assert!(e.starts_with("invalid agent ID"), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_response_is_fixed_at_the_first_read_and_read_in_parts() {
    bounded(async {
        let h = Harness::yolo(&[ECHO, SH]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        c.load("a1", "sh").await;
        let whole = c.ask("tools", "a1").await.expect("tools");
        let fid = c.open("tools", toolsrv_wire::ORDWR).await.expect("open");
        c.write(fid, b"a1").await.expect("write");
        let mut parts = Vec::new();
        loop {
            let r = c
                .rpc(Body::Tread {
                    fid,
                    offset: parts.len() as u64,
                    count: 10,
                })
                .await;
            let Body::Rread { data } = r else {
                panic!("read: {r:?}")
            };
            if data.is_empty() {
                break;
            }
            assert!(data.len() <= 10);
            parts.extend_from_slice(&data);
            // A change after the first read does not change the response.
            if parts.len() == 10 {
                c.ctl("unload a1 sh").await.expect("unload");
            }
        }
        c.clunk(fid).await;
        assert_eq!(String::from_utf8(parts).expect("UTF-8"), whole);
    })
    .await
}
