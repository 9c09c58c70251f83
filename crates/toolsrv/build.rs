//! Records the git revision the binary is built from, for `toolsrv --version`
//! (and for `remote up`, which compares versions): `TOOLSRV_GIT_REV`, or
//! "unknown" outside a git checkout.
//!
//! Git runs with `--no-optional-locks`, so `git status` does not refresh
//! (rewrite) `.git/index`: the index changing is one of the reasons this script
//! runs again, and a script that rewrote it would rebuild the binary on every
//! `cargo build`.

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for p in watched(&root.join(".git")) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("--no-optional-locks")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
    };
    let rev = git(&["rev-parse", "--short=12", "HEAD"])
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|o| !o.stdout.is_empty());
    let rev = if dirty { format!("{rev}-dirty") } else { rev };
    println!("cargo:rustc-env=TOOLSRV_GIT_REV={rev}");
}

/// The files whose change can change the revision or the dirty flag: `HEAD`,
/// the branch it points to (loose or packed), and the index. Only those that
/// exist (in a linked worktree `.git` is a file and nothing is watched, so
/// cargo falls back to watching the package's sources).
fn watched(git_dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![git_dir.join("HEAD"), git_dir.join("index")];
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD")) {
        if let Some(reference) = head.trim().strip_prefix("ref: ") {
            out.push(git_dir.join(reference));
            out.push(git_dir.join("packed-refs"));
        }
    }
    out.retain(|p| p.is_file());
    out
}
