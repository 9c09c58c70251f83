//! Shared by the client's integration tests: the real `toolsrv` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Locate (building if needed) the `toolsrv` binary of this target directory.
pub fn toolsrv_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        // <target>/debug/deps/<test-binary>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in <target>/<profile>/deps");
        let bin = profile_dir.join("toolsrv");
        if !bin.exists() {
            let target_dir = profile_dir.parent().expect("target dir");
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "toolsrv", "--target-dir"])
                .arg(target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build -p toolsrv");
            assert!(status.success(), "cargo build -p toolsrv failed");
        }
        assert!(bin.exists(), "{} is missing", bin.display());
        bin
    })
    .clone()
}
