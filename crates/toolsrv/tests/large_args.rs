//! Argument values larger than a command line holds (Linux passes at most
//! 128 KiB per argument or environment string): the built-in `file_write`
//! and `file_edit` declare theirs `file: true` and get them in files, through
//! the CLI (`key=@path`, `key=@-`) and raw 9P; a tool that does not is
//! refused with the numbers, as is a request whose environment is too large.
//! (Through MCP: the Python SDK's `large` scenario in `mcp.rs`.)

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;
use toolsrv_wire::{Body, ORDWR};

use crate::procs_util::{load, payload};
use crate::util::{toolsrv_bin, Launch, Raw, Server};

/// 20,000 numbered lines: 148,890 bytes.
fn big_text() -> String {
    let t: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    assert!(t.len() > 140_000);
    t
}

/// `toolsrv call` against `srv` with `stdin` as standard input: (exit code,
/// stdout, stderr).
fn call(srv: &Server, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(toolsrv_bin())
        .arg("call")
        .args(args)
        .current_dir(srv.cwd())
        .env("TOOLSRV_SOCKET", &srv.socket)
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the CLI");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("wait for the CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_sends_values_from_a_file_and_from_stdin_larger_than_a_command_line() {
    let srv = Server::start(&["--no-auth"]);
    let big = big_text();
    let outside = tempfile::tempdir().expect("tempdir");
    let src = outside.path().join("big.txt");
    std::fs::write(&src, &big).expect("write the source");
    let (code, out, err) = call(
        &srv,
        &[
            "file_write",
            "path=copy.txt",
            &format!("content=@{}", src.display()),
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, format!("wrote {} bytes to copy.txt\n", big.len()));
    assert_eq!(
        std::fs::read_to_string(srv.cwd().join("copy.txt")).expect("read"),
        big
    );
    // From standard input, and a literal leading @ doubled.
    let edited = big.replace("line 19999\n", "@the end\n");
    let (code, out, err) = call(
        &srv,
        &["file_write", "path=copy.txt", "content=@-"],
        edited.as_bytes(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = call(
        &srv,
        &[
            "file_edit",
            "path=copy.txt",
            "old=@@the end",
            "new=@@THE END",
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(srv.cwd().join("copy.txt")).expect("read"),
        big.replace("line 19999\n", "@THE END\n")
    );
    // A file that is not there is named.
    let (code, _, err) = call(
        &srv,
        &["file_write", "path=x", "content=@/nonexistent/f"],
        b"",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("content=@/nonexistent/f: cannot read /nonexistent/f"),
        "{err}"
    );
}

/// Writes `data` to `fid` in writes of at most `chunk` bytes at increasing
/// offsets, as a 9P client with a small msize must.
fn write_in_chunks(c: &mut Raw, fid: u32, data: &[u8], chunk: usize) {
    for (i, part) in data.chunks(chunk).enumerate() {
        c.ok(Body::Twrite {
            fid,
            offset: (i * chunk) as u64,
            data: part.to_vec(),
        });
    }
}

/// A call over raw 9P with its payload written in 60,000-byte pieces.
fn raw_call(c: &mut Raw, fields: &[(&str, &str)]) -> Value {
    let fid = c.fid();
    c.walk(fid, "proc/new").expect("walk");
    c.ok(Body::Topen { fid, mode: ORDWR });
    write_in_chunks(c, fid, payload(fields).as_bytes(), 60_000);
    let out = c.read_all(fid);
    c.ok(Body::Tclunk { fid });
    serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
}

#[test]
fn raw_9p_writes_a_large_value_through_file_write_and_file_edit() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    for t in ["file_write", "file_edit"] {
        load(&mut c, "a1", t);
    }
    let big = big_text();
    let r = raw_call(
        &mut c,
        &[
            ("tool", "file_write"),
            ("agent", "a1"),
            ("path", "big.txt"),
            ("content", &big),
        ],
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(srv.cwd().join("big.txt")).expect("read"),
        big
    );
    let half = &big[big.len() / 2..];
    let upper = half.to_uppercase();
    let r = raw_call(
        &mut c,
        &[
            ("tool", "file_edit"),
            ("agent", "a1"),
            ("path", "big.txt"),
            ("old", half),
            ("new", &upper),
        ],
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(srv.cwd().join("big.txt")).expect("read"),
        format!("{}{upper}", &big[..big.len() / 2])
    );
}

#[test]
fn a_value_or_environment_too_large_for_a_command_line_is_refused_with_the_numbers() {
    let srv = Launch::new()
        .arg("--no-auth")
        .tools(&[(
            "argv.yaml",
            "description: Takes its content on the command line\nparams:\n  content: {type: string}\nexecutable: /bin/true\n",
        )])
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "argv");
    let content = "x".repeat(140_000);
    let r = raw_call(
        &mut c,
        &[("tool", "argv"), ("agent", "a1"), ("content", &content)],
    );
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text.starts_with("content is 140000 bytes; tool \"argv\" receives its arguments on its command line and in its environment, where Linux takes at most "),
        "{text}"
    );
    assert!(text.contains("\"file: true\""), "{text}");
    // One variable of the request's environment too large.
    let r = raw_call(
        &mut c,
        &[("tool", "argv"), ("agent", "a1"), ("env.BIG", &content)],
    );
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("env.BIG is 140000 bytes; Linux passes at most 131067 bytes in one environment variable"),
        "{r}"
    );
    // Many variables that each fit, but not together.
    // Safety: sysconf has no memory arguments.
    let arg_max = unsafe { libc::sysconf(libc::_SC_ARG_MAX) } as usize;
    let n = arg_max / 120_000 + 2;
    if n > 100 {
        toolsrv_testkit::skip::cannot_run_here(&format!(
            "the stack limit allows {arg_max} bytes of arguments: more than 100 variables would be needed"
        ));
        return;
    }
    let value = "y".repeat(120_000);
    let names: Vec<String> = (0..n).map(|i| format!("env.V{i}")).collect();
    let mut fields = vec![("tool", "argv"), ("agent", "a1")];
    fields.extend(names.iter().map(|k| (k.as_str(), value.as_str())));
    let r = raw_call(&mut c, &fields);
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("the command line and environment of tool \"argv\" are ")
            && text.contains(&format!(
                "bytes together; Linux passes at most {arg_max} bytes to a program"
            )),
        "{r}"
    );
}
