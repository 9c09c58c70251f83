//! The per-agent registry through `ctl`, `tools` and `tools_rev` (docs/protocol.md, "Namespace"
//!): load, unload, revisions, and a tool file that changes after it was
//! loaded.

use super::support::{bounded, outcome, Harness, ECHO, SH, TYPED};

#[tokio::test]
async fn an_agent_never_seen_is_at_revision_zero_with_no_tools() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        assert_eq!(c.rev("nobody").await, 0);
        assert_eq!(c.ask("tools", "nobody").await.expect("tools"), "[]");
    })
    .await
}

#[tokio::test]
async fn each_load_and_unload_increments_the_revision() {
    bounded(async {
        let h = Harness::yolo(&[ECHO, SH]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        assert_eq!(c.rev("a1").await, 1);
        c.load("a1", "sh").await;
        assert_eq!(c.rev("a1").await, 2);
        c.ctl("unload a1 echo").await.expect("unload");
        assert_eq!(c.rev("a1").await, 3);
    })
    .await
}

#[tokio::test]
async fn loading_a_loaded_tool_again_succeeds_and_increments_the_revision() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        c.load("a1", "echo").await;
        assert_eq!(c.rev("a1").await, 2);
        let tools = c.ask("tools", "a1").await.expect("tools");
        assert_eq!(tools.matches("\"name\"").count(), 1, "{tools}");
    })
    .await
}

#[tokio::test]
async fn unloading_a_tool_that_is_not_loaded_fails_and_keeps_the_revision() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        let e = c.ctl("unload a1 echo").await.expect_err("unloads");
        assert_eq!(e, r#"tool "echo" is not loaded for agent "a1""#);
        assert_eq!(c.rev("a1").await, 0);
    })
    .await
}

#[tokio::test]
async fn loading_an_unknown_tool_fails_naming_it() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        let e = c.ctl("load a1 nonesuch").await.expect_err("loads");
        assert_eq!(e, r#"unknown tool "nonesuch""#);
        assert_eq!(c.rev("a1").await, 0);
    })
    .await
}

#[tokio::test]
async fn invalid_agent_ids_and_tool_names_are_refused() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        for agent in ["a/b", "a\u{e9}", ".", "..", &"x".repeat(129)] {
            let e = c.ctl(&format!("load {agent} echo")).await.expect_err(agent);
            assert!(e.starts_with("invalid agent ID"), "{agent}: {e}");
        }
        for tool in ["a/b", "t$", ".", "..", &"t".repeat(129)] {
            let e = c.ctl(&format!("load a1 {tool}")).await.expect_err(tool);
            assert!(e.starts_with("invalid tool name"), "{tool}: {e}");
        }
        let e = c.ask("tools_rev", "a/b").await.expect_err("a rev");
        assert!(e.starts_with("invalid agent ID"), "{e}");
    })
    .await
}

#[tokio::test]
async fn malformed_ctl_commands_name_what_is_wrong() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        let e = c.ctl("frobnicate a1 echo").await.expect_err("applies");
        assert!(e.starts_with("unknown ctl command"), "{e}");
        let e = c.ctl("load a1").await.expect_err("applies");
        assert!(e.starts_with("usage: load <agent> <tool>"), "{e}");
        let e = c.ctl("unload a1 echo extra").await.expect_err("applies");
        assert!(e.starts_with("usage: unload <agent> <tool>"), "{e}");
    })
    .await
}

#[tokio::test]
async fn several_commands_in_one_write_apply_in_order_up_to_the_first_bad_one() {
    bounded(async {
        let h = Harness::yolo(&[ECHO, SH]);
        let mut c = h.connect().await;
        let e = c
            .ctl("load a1 echo\nload a1 nonesuch\nload a1 sh\n")
            .await
            .expect_err("applies");
        assert_eq!(e, r#"unknown tool "nonesuch""#);
        assert_eq!(c.rev("a1").await, 1);
        let tools = c.ask("tools", "a1").await.expect("tools");
        assert!(
            tools.contains("\"echo\"") && !tools.contains("\"sh\""),
            "{tools}"
        );
    })
    .await
}

#[tokio::test]
async fn tools_lists_the_loaded_tools_sorted_with_their_schemas() {
    bounded(async {
        let h = Harness::yolo(&[ECHO, SH, TYPED]);
        let mut c = h.connect().await;
        c.load("a1", "typed").await;
        c.load("a1", "echo").await;
        let tools: serde_json::Value =
            serde_json::from_str(&c.ask("tools", "a1\n").await.expect("tools")).expect("JSON");
        let names: Vec<&str> = tools
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["echo", "typed"]);
        assert_eq!(tools[0]["description"], "Print a text");
        assert_eq!(tools[0]["inputSchema"]["type"], "object");
        assert_eq!(tools[0]["inputSchema"]["required"][0], "text");
        assert_eq!(tools[1]["inputSchema"]["additionalProperties"], false);
    })
    .await
}

#[tokio::test]
async fn agents_have_registries_of_their_own() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        assert_eq!(c.rev("a2").await, 0);
        assert_eq!(c.ask("tools", "a2").await.expect("tools"), "[]");
        let r = c
            .call(&[("tool", "echo"), ("agent", "a2"), ("text", "hi")])
            .await;
        assert_eq!(
            outcome(&r),
            (
                true,
                r#"tool "echo" is not loaded for agent "a2""#.to_string()
            )
        );
    })
    .await
}

#[tokio::test]
async fn a_registry_is_shared_by_every_connection() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        let mut d = h.connect().await;
        c.load("a1", "echo").await;
        assert_eq!(d.rev("a1").await, 1);
        let r = d
            .call(&[("tool", "echo"), ("agent", "a1"), ("text", "hi")])
            .await;
        assert_eq!(outcome(&r), (false, "hi".to_string()));
    })
    .await
}

#[tokio::test]
async fn an_unloaded_tool_is_no_longer_callable() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        c.ctl("unload a1 echo").await.expect("unload");
        let r = c
            .call(&[("tool", "echo"), ("agent", "a1"), ("text", "hi")])
            .await;
        assert_eq!(
            outcome(&r),
            (
                true,
                r#"tool "echo" is not loaded for agent "a1""#.to_string()
            )
        );
    })
    .await
}

/// Calls `echo` with `hi` once and asserts the outcome: a change to a tool
/// file made before a request is sent is seen by that request (the file
/// watch reads inotify's queue at each call, see filewatch.rs).
async fn call_expecting(c: &mut super::support::Peer, want: (bool, &str)) -> serde_json::Value {
    let r = c
        .call(&[("tool", "echo"), ("agent", "a1"), ("text", "hi")])
        .await;
    let (err, text) = outcome(&r);
    assert!(
        err == want.0 && text.contains(want.1),
        "want {want:?}, got {r}"
    );
    r
}

#[tokio::test]
async fn a_tool_file_changed_after_load_is_reloaded_by_the_next_call() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        let r = c
            .call(&[("tool", "echo"), ("agent", "a1"), ("text", "hi")])
            .await;
        assert_eq!(outcome(&r), (false, "hi".to_string()));
        h.write_tool(
            "echo.yaml",
            "description: Shout a text\nparams:\n  text: {type: string, required: true}\ncommand: \"printf 'v2 %s' {text}\"\n",
        );
        call_expecting(&mut c, (false, "v2 hi")).await;
        // The reload is a load: the revision moved and `tools` shows the new file.
        assert_eq!(c.rev("a1").await, 2);
        let tools = c.ask("tools", "a1").await.expect("tools");
        assert!(tools.contains("Shout a text"), "{tools}");
    })
    .await
}

#[tokio::test]
async fn a_tool_file_broken_after_load_refuses_calls_until_fixed_and_loaded() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        h.write_tool("echo.yaml", "description: x\nbogus_key: 1\n");
        let r = call_expecting(&mut c, (true, "changed since it was loaded")).await;
        let (_, text) = outcome(&r);
        assert!(
            text.contains("echo.yaml") && text.contains("toolsrv load a1 echo"),
            "{text}"
        );
        let e = c.ctl("load a1 echo").await.expect_err("loads");
        assert!(e.contains("bogus_key"), "{e}");
        h.write_tool(ECHO.0, ECHO.1);
        c.load("a1", "echo").await;
        call_expecting(&mut c, (false, "hi")).await;
    })
    .await
}

#[tokio::test]
async fn a_tool_file_removed_after_load_is_refused_at_the_next_call() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.load("a1", "echo").await;
        std::fs::remove_file(h.tools.join("echo.yaml")).expect("rm");
        call_expecting(&mut c, (true, "no longer loads")).await;
        let e = c.ctl("load a1 echo").await.expect_err("loads");
        assert_eq!(e, r#"unknown tool "echo""#);
    })
    .await
}

#[tokio::test]
async fn a_trailing_newline_on_an_agent_id_is_ignored() {
    bounded(async {
        let h = Harness::yolo(&[ECHO]);
        let mut c = h.connect().await;
        c.ctl("load a1 echo\n").await.expect("load");
        assert_eq!(c.ask("tools_rev", "a1\n").await.expect("rev"), "1");
    })
    .await
}
