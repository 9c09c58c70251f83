//! The Python 9P client of docs/protocol.md ("A client in Python"), run as
//! written against a real server with authentication on.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::Server;

/// The `python` block of docs/protocol.md.
fn the_docs_client() -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md");
    let text = std::fs::read_to_string(&doc).expect("read docs/protocol.md");
    let start = text.find("```python\n").expect("a python block") + "```python\n".len();
    let len = text[start..].find("```").expect("the block's end");
    text[start..start + len].to_string()
}

#[test]
fn the_python_client_of_the_docs_calls_a_tool() {
    if Command::new("python3").arg("--version").output().is_err() {
        toolsrv_testkit::skip::missing_prerequisite(
            "python3 (for the Python 9P client of docs/protocol.md)",
        );
        return;
    }
    let srv = Server::start(&[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("client.py");
    std::fs::write(&script, the_docs_client()).expect("write client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&srv.socket)
        .env("TOOLSRV_SECRET", "the python client's secret")
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from Python\n2\n"
    );
    // A wrong secret is refused as the docs say.
    let out = Command::new("python3")
        .arg(&script)
        .arg(&srv.socket)
        .env("TOOLSRV_SECRET", "another secret")
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("RuntimeError: authentication failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
