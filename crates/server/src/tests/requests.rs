//! Preparing and running requests (docs/protocol.md, "Requests and results"; docs/containment.md; docs/policy-format.md, "Protected paths"): results, and
//! every refusal on the way (payload, token, tool, arguments, validation,
//! rate limit, working directory, sandbox).

use toolsrv_wire::{Body, ORDWR};

use super::support::{bounded, outcome, payload, Harness, Peer, ECHO, SH, TYPED};

/// A yolo server with `tools`, each loaded for `a1`.
async fn session(tools: &[(&str, &str)]) -> (Harness, Peer) {
    let h = Harness::yolo(tools);
    let mut c = h.connect().await;
    for (file, _) in tools {
        c.load("a1", file.trim_end_matches(".yaml")).await;
    }
    (h, c)
}

/// A sandboxed server with `sh`, loaded for `a1`.
async fn sandboxed_sh() -> (Harness, Peer) {
    let h = Harness::sandboxed(&[SH]);
    let mut c = h.connect().await;
    c.load("a1", "sh").await;
    (h, c)
}

/// The error text of a refused synchronous call of `fields`.
async fn refusal(c: &mut Peer, fields: &[(&str, &str)]) -> String {
    let r = c.call(fields).await;
    let (err, text) = outcome(&r);
    assert!(err, "not refused: {text}");
    text
}

/// The result of raw payload bytes written to `proc/new`.
async fn call_raw(c: &mut Peer, bytes: &[u8]) -> (bool, String) {
    let fid = c.open("proc/new", ORDWR).await.expect("open");
    c.write(fid, bytes).await.expect("write");
    let out = c.read_all(fid).await.expect("read");
    c.clunk(fid).await;
    outcome(&serde_json::from_slice(&out).expect("JSON"))
}

#[tokio::test]
async fn a_call_returns_the_tools_output() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let r = c
            .call(&[
                ("tool", "echo"),
                ("agent", "a1"),
                ("text", "it's \"quoted\""),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "it's \"quoted\"".to_string()));
    })
    .await
}

#[tokio::test]
async fn a_non_zero_exit_is_an_error_result_ending_with_its_status() {
    bounded(async {
        let (_h, mut c) = session(&[SH]).await;
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("command", "echo oops; exit 4"),
            ],
        )
        .await;
        assert_eq!(text, "oops\nexit status 4");
    })
    .await
}

#[tokio::test]
async fn a_payload_that_is_not_utf8_is_refused_with_the_offset() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let (err, text) = call_raw(&mut c, b"tool=echo\nagent=a1\ntext=\xff\n").await;
        assert!(err);
        assert!(text.starts_with("payload is not valid UTF-8"), "{text}");
    })
    .await
}

#[tokio::test]
async fn malformed_payload_lines_are_refused_naming_the_line() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        assert_eq!(
            call_raw(&mut c, b"tool=echo\nagent a1\n").await,
            (true, r#"malformed payload line "agent a1""#.to_string())
        );
        assert_eq!(
            call_raw(&mut c, b"tool=echo\n=x\n").await,
            (true, r#"empty key in payload line "=x""#.to_string())
        );
    })
    .await
}

#[tokio::test]
async fn a_payload_without_tool_or_agent_is_refused() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        assert_eq!(refusal(&mut c, &[("agent", "a1")]).await, "missing tool");
        assert_eq!(refusal(&mut c, &[("tool", "echo")]).await, "missing agent");
    })
    .await
}

#[tokio::test]
async fn a_duplicate_key_is_refused() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let (err, text) = call_raw(&mut c, b"tool=echo\nagent=a1\ntext=a\ntext=b\n").await;
        assert!(err);
        assert!(
            text.starts_with("duplicate key") && text.contains("text"),
            "{text}"
        );
    })
    .await
}

#[tokio::test]
async fn a_tool_not_loaded_for_the_agent_is_refused_naming_both() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        assert_eq!(
            refusal(
                &mut c,
                &[("tool", "sh"), ("agent", "a1"), ("command", "true")]
            )
            .await,
            r#"tool "sh" is not loaded for agent "a1""#
        );
    })
    .await
}

#[tokio::test]
async fn a_missing_required_argument_is_refused_naming_it() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let text = refusal(&mut c, &[("tool", "echo"), ("agent", "a1")]).await;
        assert!(
            text.starts_with("missing required argument") && text.contains("text"),
            "{text}"
        );
    })
    .await
}

#[tokio::test]
async fn an_unknown_argument_of_a_closed_schema_is_refused_naming_it() {
    bounded(async {
        let (_h, mut c) = session(&[TYPED]).await;
        let text = refusal(
            &mut c,
            &[
                ("tool", "typed"),
                ("agent", "a1"),
                ("n", "1"),
                ("colour", "red"),
            ],
        )
        .await;
        assert!(
            text.starts_with("unknown argument") && text.contains("colour"),
            "{text}"
        );
    })
    .await
}

#[tokio::test]
async fn typed_arguments_of_the_wrong_type_are_refused_naming_them() {
    bounded(async {
        let (_h, mut c) = session(&[TYPED]).await;
        for (n, flag, want) in [
            (
                "2.5",
                "true",
                r#"argument "n" must be an integer, got "2.5""#,
            ),
            (
                "two",
                "true",
                r#"argument "n" must be an integer, got "two""#,
            ),
            (
                "1",
                "yes",
                r#"argument "flag" must be a boolean, got "yes""#,
            ),
        ] {
            let fields = [("tool", "typed"), ("agent", "a1"), ("n", n), ("flag", flag)];
            assert_eq!(refusal(&mut c, &fields).await, want);
        }
        let r = c
            .call(&[
                ("tool", "typed"),
                ("agent", "a1"),
                ("n", "2"),
                ("flag", "true"),
                ("name", "x"),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "2 x\n".to_string()));
    })
    .await
}

#[tokio::test]
async fn an_invalid_timeout_or_bypass_value_is_refused() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let base = [("tool", "echo"), ("agent", "a1"), ("text", "x")];
        let text = refusal(&mut c, &[&base[..], &[("timeout", "soon")]].concat()).await;
        assert!(text.starts_with("invalid timeout"), "{text}");
        let text = refusal(&mut c, &[&base[..], &[("bypass", "maybe")]].concat()).await;
        assert!(text.starts_with("invalid bypass"), "{text}");
    })
    .await
}

#[tokio::test]
async fn environment_names_the_server_sets_cannot_be_set_by_a_request() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        for name in [
            "LD_PRELOAD",
            "TOOL_ARGS",
            "PWD",
            "OLLIE_AGENT_ID",
            "BASH_ENV",
            "IFS",
        ] {
            let key = format!("env.{name}");
            let text = refusal(
                &mut c,
                &[
                    ("tool", "echo"),
                    ("agent", "a1"),
                    ("text", "x"),
                    (&key, "v"),
                ],
            )
            .await;
            assert!(
                text.contains("cannot be set by a request") && text.contains(name),
                "{name}: {text}"
            );
        }
    })
    .await
}

#[tokio::test]
async fn a_request_environment_variable_reaches_the_tool() {
    bounded(async {
        let (_h, mut c) = session(&[SH]).await;
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("env.GREETING", "hello there"),
                ("command", "printf %s \"$GREETING:$OLLIE_AGENT_ID\""),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "hello there:a1".to_string()));
    })
    .await
}

#[tokio::test]
async fn invalid_session_and_agent_values_are_refused_naming_them() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let text = refusal(
            &mut c,
            &[
                ("tool", "echo"),
                ("agent", "a1"),
                ("session", "s/1"),
                ("text", "x"),
            ],
        )
        .await;
        assert!(text.starts_with("invalid session"), "{text}");
        let text = refusal(&mut c, &[("tool", "echo"), ("agent", "a/1"), ("text", "x")]).await;
        assert!(text.starts_with("invalid agent ID"), "{text}");
    })
    .await
}

#[tokio::test]
async fn validation_refuses_a_dangerous_command_before_anything_runs() {
    bounded(async {
        let (h, mut c) = session(&[SH]).await;
        let marker = h.cwd.join("ran");
        let command = format!("touch {}; rm -rf /", marker.display());
        let text = refusal(
            &mut c,
            &[("tool", "sh"), ("agent", "a1"), ("command", &command)],
        )
        .await;
        assert!(
            text.starts_with("command refused by validation rule"),
            "{text}"
        );
        assert!(!marker.exists(), "the command ran");
        // Environment values are checked like string arguments.
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("env.X", "mkfs.ext4 /dev/sda"),
                ("command", "true"),
            ],
        )
        .await;
        assert!(
            text.starts_with("command refused by validation rule") && text.contains("mkfs"),
            "{text}"
        );
    })
    .await
}

#[tokio::test]
async fn the_fifth_validation_refusal_in_a_minute_rate_limits_only_that_agent() {
    bounded(async {
        let (_h, mut c) = session(&[SH]).await;
        c.load("a2", "sh").await;
        let bad = [("tool", "sh"), ("agent", "a1"), ("command", "reboot")];
        for _ in 0..5 {
            let text = refusal(&mut c, &bad).await;
            assert!(!text.starts_with("rate limited"), "{text}");
        }
        let good = [("tool", "sh"), ("agent", "a1"), ("command", "echo fine")];
        let text = refusal(&mut c, &good).await;
        assert!(
            text.starts_with("rate limited: too many rejected commands, retry in "),
            "{text}"
        );
        let r = c
            .call(&[("tool", "sh"), ("agent", "a2"), ("command", "echo fine")])
            .await;
        assert_eq!(outcome(&r), (false, "fine\n".to_string()));
    })
    .await
}

#[tokio::test]
async fn a_sandboxed_cwd_outside_the_servers_cwd_is_refused() {
    bounded(async {
        let (_h, mut c) = sandboxed_sh().await;
        for cwd in ["/", "..", "/etc"] {
            let text = refusal(
                &mut c,
                &[
                    ("tool", "sh"),
                    ("agent", "a1"),
                    ("cwd", cwd),
                    ("command", "pwd"),
                ],
            )
            .await;
            assert!(
                text.contains("is outside the server's --cwd"),
                "{cwd}: {text}"
            );
        }
    })
    .await
}

/// Unconfined (`--yolo`) requests may name any directory.
#[tokio::test]
async fn an_unconfined_request_may_run_outside_the_servers_cwd() {
    bounded(async {
        let (_h, mut c) = session(&[SH]).await;
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "/"),
                ("command", "pwd"),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "/\n".to_string()));
    })
    .await
}

#[tokio::test]
async fn a_cwd_that_does_not_exist_or_is_a_file_is_refused() {
    bounded(async {
        let (h, mut c) = session(&[SH]).await;
        std::fs::write(h.cwd.join("file"), "x").expect("write");
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "missing"),
                ("command", "pwd"),
            ],
        )
        .await;
        assert!(text.contains("does not exist"), "{text}");
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "file"),
                ("command", "pwd"),
            ],
        )
        .await;
        assert!(text.contains("is not a directory"), "{text}");
    })
    .await
}

#[tokio::test]
async fn a_sandboxed_cwd_symlink_leaving_the_servers_cwd_is_refused() {
    bounded(async {
        let (h, mut c) = sandboxed_sh().await;
        std::os::unix::fs::symlink("/etc", h.cwd.join("out")).expect("symlink");
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "out"),
                ("command", "pwd"),
            ],
        )
        .await;
        assert!(text.contains("outside the server's --cwd"), "{text}");
    })
    .await
}

#[tokio::test]
async fn a_relative_cwd_resolves_against_the_servers_cwd() {
    bounded(async {
        let (h, mut c) = session(&[SH]).await;
        std::fs::create_dir(h.cwd.join("sub")).expect("mkdir");
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "sub"),
                ("command", "pwd"),
            ])
            .await;
        let want = format!("{}\n", h.cwd.join("sub").display());
        assert_eq!(outcome(&r), (false, want));
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", "pwd")])
            .await;
        assert_eq!(outcome(&r), (false, format!("{}\n", h.cwd.display())));
    })
    .await
}

#[tokio::test]
async fn a_timeout_ends_the_run_with_an_error_result() {
    bounded(async {
        let (_h, mut c) = session(&[SH]).await;
        let started = std::time::Instant::now();
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("timeout", "300ms"),
                ("command", "echo begun; sleep 30"),
            ])
            .await;
        assert_eq!(
            outcome(&r),
            (true, "begun\ntimed out after 300ms".to_string())
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    })
    .await
}

#[tokio::test]
async fn an_unknown_sandbox_profile_is_refused_naming_it() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let text = refusal(
            &mut c,
            &[
                ("tool", "echo"),
                ("agent", "a1"),
                ("sandbox", "nonesuch"),
                ("text", "x"),
            ],
        )
        .await;
        assert_eq!(text, r#"unknown sandbox profile "nonesuch""#);
    })
    .await
}

#[tokio::test]
async fn a_refused_background_request_fails_its_read_with_the_same_text() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let e = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect_err("starts");
        assert_eq!(e, r#"tool "sh" is not loaded for agent "a1""#);
        let e = c
            .bg(&[("tool", "echo"), ("agent", "a1")])
            .await
            .expect_err("starts");
        assert!(e.starts_with("missing required argument"), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_payload_written_in_parts_is_one_request() {
    bounded(async {
        let (_h, mut c) = session(&[ECHO]).await;
        let p = payload(&[("tool", "echo"), ("agent", "a1"), ("text", "joined")]);
        let (a, b) = p.as_bytes().split_at(7);
        let fid = c.open("proc/new", ORDWR).await.expect("open");
        c.write(fid, a).await.expect("write");
        let r = c
            .rpc(Body::Twrite {
                fid,
                offset: a.len() as u64,
                data: b.to_vec(),
            })
            .await;
        assert!(matches!(r, Body::Rwrite { .. }), "{r:?}");
        let out = c.read_all(fid).await.expect("read");
        c.clunk(fid).await;
        assert_eq!(
            outcome(&serde_json::from_slice(&out).expect("JSON")),
            (false, "joined".to_string())
        );
    })
    .await
}

#[tokio::test]
async fn with_auth_on_a_request_without_the_token_is_refused() {
    bounded(async {
        let h = Harness::start(&[ECHO], |c| {
            c.yolo = true;
            c.no_auth = false;
        });
        let mut c = h.connect_authenticated(b"the secret").await;
        c.load("a1", "echo").await;
        let r = c
            .call(&[("tool", "echo"), ("agent", "a1"), ("text", "x")])
            .await;
        assert_eq!(outcome(&r), (true, "invalid token".to_string()));
        let r = c
            .call(&[
                ("token", &"0".repeat(64)),
                ("tool", "echo"),
                ("agent", "a1"),
                ("text", "x"),
            ])
            .await;
        assert_eq!(outcome(&r), (true, "invalid token".to_string()));
        let token = c.token.clone().expect("a token");
        let r = c
            .call(&[
                ("token", &token),
                ("tool", "echo"),
                ("agent", "a1"),
                ("text", "x"),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "x".to_string()));
    })
    .await
}

#[tokio::test]
async fn with_auth_on_attaching_without_an_accepted_secret_fails() {
    bounded(async {
        let h = Harness::start(&[], |c| c.no_auth = false);
        let mut p = h.connect_versioned().await;
        let r = p
            .rpc(Body::Tattach {
                fid: 0,
                afid: toolsrv_wire::NOFID,
                uname: "u".into(),
                aname: String::new(),
            })
            .await;
        assert_eq!(
            r,
            Body::Rerror {
                ename: "authentication required".into()
            }
        );
        let _first = h.connect_authenticated(b"one").await;
        let mut p = h.connect_versioned().await;
        let e = p.authenticate(b"two").await.expect_err("accepted");
        assert_eq!(e, "authentication failed");
    })
    .await
}

/// `<socket>.secret` is hidden from every sandbox rule (docs/policy-format.md, "Protected paths"), even
/// where the policy grants its directory: here the socket lies in `--cwd`,
/// which the built-in policy lets tools read and write.
#[tokio::test]
async fn a_sandboxed_run_cannot_read_the_servers_hidden_files() {
    bounded(async {
        let mut secret = std::path::PathBuf::new();
        let h = Harness::start(&[SH], |c| {
            c.listen = c.cwd.join("toolsrv.sock");
            secret = c.cwd.join("toolsrv.sock.secret");
            std::fs::write(&secret, "s3cret-value").expect("write");
            std::fs::write(c.cwd.join("beside"), "plain").expect("write");
        });
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let command = format!("cat {}", secret.display());
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", &command)])
            .await;
        let (_, text) = outcome(&r);
        assert!(
            !text.contains("s3cret-value"),
            "the secret was read: {text}"
        );
        // A file that was beside it when the server started is readable:
        // the refusal is the carving's, not the policy's.
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", "cat beside")])
            .await;
        assert_eq!(outcome(&r), (false, "plain".to_string()));
    })
    .await
}

#[tokio::test]
async fn a_sandboxed_run_writes_its_cwd_but_not_outside_it() {
    bounded(async {
        let h = Harness::sandboxed(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let r = c
            .call(&[
                ("tool", "sh"),
                ("agent", "a1"),
                ("command", "echo ok > inside && cat inside"),
            ])
            .await;
        assert_eq!(outcome(&r), (false, "ok\n".to_string()));
        let outside = h.tools.join("planted");
        let command = format!("echo x > {}", outside.display());
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", &command)])
            .await;
        assert!(outcome(&r).0, "the write outside was allowed");
        assert!(!outside.exists());
    })
    .await
}

#[tokio::test]
async fn a_sandboxed_request_cannot_run_in_a_protected_directory() {
    bounded(async {
        // The tools directory inside --cwd: a request may not choose it as cwd.
        let h = Harness::start(&[SH], |c| {
            let inside = c.cwd.join("tools");
            std::fs::rename(&c.tools_dir, &inside).expect("move tools");
            c.tools_dir = inside;
        });
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let text = refusal(
            &mut c,
            &[
                ("tool", "sh"),
                ("agent", "a1"),
                ("cwd", "tools"),
                ("command", "pwd"),
            ],
        )
        .await;
        assert!(
            text.contains("is protected") && text.contains("choose another cwd"),
            "{text}"
        );
        let r = c
            .call(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await;
        assert!(!outcome(&r).0, "{r}");
    })
    .await
}

#[tokio::test]
async fn sandboxed_shows_in_the_process_stat() {
    bounded(async {
        let h = Harness::sandboxed(&[SH]);
        let mut c = h.connect().await;
        c.load("a1", "sh").await;
        let pid = c
            .bg(&[("tool", "sh"), ("agent", "a1"), ("command", "true")])
            .await
            .expect("bg");
        c.wait(pid).await.expect("wait");
        assert_eq!(c.proc_stat(pid).await.expect("stat")["sandboxed"], true);
    })
    .await
}

#[tokio::test]
async fn a_tool_that_cannot_start_is_an_error_result_and_a_failed_process() {
    bounded(async {
        let missing = (
            "missing.yaml",
            "description: Not there\nexecutable: /nonexistent/toolsrv-test-program\n",
        );
        let (_h, mut c) = session(&[missing]).await;
        let r = c.call(&[("tool", "missing"), ("agent", "a1")]).await;
        let (err, text) = outcome(&r);
        assert!(
            err && text.contains("/nonexistent/toolsrv-test-program"),
            "{text}"
        );
        let pid = c
            .bg(&[("tool", "missing"), ("agent", "a1")])
            .await
            .expect("bg");
        assert_eq!(c.wait(pid).await.expect("wait"), 127);
        assert_eq!(c.proc_stat(pid).await.expect("stat")["state"], "failed");
    })
    .await
}

#[tokio::test]
async fn image_output_is_an_image_item_in_base64() {
    bounded(async {
        let png = (
            "png.yaml",
            "description: A PNG header\noutput: image\ncommand: \"printf '\\\\211PNG\\\\r\\\\n\\\\032\\\\n'\"\n",
        );
        let (_h, mut c) = session(&[png]).await;
        let r = c.call(&[("tool", "png"), ("agent", "a1")]).await;
        assert_eq!(r["isError"], false, "{r}");
        let item = &r["content"][0];
        assert_eq!(item["type"], "image", "{r}");
        assert_eq!(item["mimeType"], "image/png");
        assert_eq!(item["data"], "iVBORw0KGgo=");
    })
    .await
}
