//! Where the binaries under test are: found in the target directory that
//! `cargo test` filled, never built from inside a test.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `<target>/<profile>`: the directory of the running test binary's `deps/`.
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("the test binary has a directory");
    // Tests live in <target>/<profile>/deps; bench and example binaries one up.
    if deps
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        deps.parent()
            .map(Path::to_path_buf)
            .expect("target/<profile>")
    } else {
        deps.to_path_buf()
    }
}

/// The `toolsrv` binary under test: `$TOOLSRV_TEST_BIN` (to show that a
/// regression test fails against an older build), else `toolsrv` in this
/// target directory's profile (`cargo test --workspace` builds it).
pub fn toolsrv_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("TOOLSRV_TEST_BIN") {
            return PathBuf::from(p);
        }
        let bin = profile_dir().join("toolsrv");
        assert!(
            bin.is_file(),
            "{} is missing: `cargo test --workspace` builds it (or `cargo build -p toolsrv`)",
            bin.display()
        );
        bin
    })
}

/// The `toolsrv` CLI as a client of `socket` (`--socket`), with neither
/// `TOOLSRV_SOCKET` nor `TOOLSRV_SECRET` from the test's environment and
/// stdin from /dev/null.
pub fn cli(socket: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(toolsrv_bin());
    cmd.arg("--socket")
        .arg(socket)
        .env_remove("TOOLSRV_SECRET")
        .env_remove("TOOLSRV_SOCKET")
        .stdin(std::process::Stdio::null());
    cmd
}

/// The example binary `name` of a workspace crate (`cargo test` builds every
/// example of the crates it tests): `<target>/<profile>/examples/<name>`.
pub fn example(name: &str) -> PathBuf {
    let path = profile_dir().join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is missing: `cargo test` builds the examples (or `cargo build --examples -p <crate>`)",
        path.display()
    );
    path
}
