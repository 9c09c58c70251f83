//! Filesystem confinement: escape attempts fail with EACCES, allowed counterparts work.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::spawn_support::{base_rules, confine, run, run_probe, sh};
use toolsrv_sandbox::Confinement;
use toolsrv_sandbox::ExitStatus;
use toolsrv_sandbox::ResolvedRules;

const DENIED: &str = "Permission denied";

/// A scratch tree: ro/, rox/, rw/ (covered by rules) and outside/ (not covered).
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        for sub in ["ro", "rox", "rw", "outside"] {
            fs::create_dir(root.join(sub)).expect("mkdir");
        }
        fs::write(root.join("ro/data"), "ro-data").expect("write");
        fs::write(root.join("rw/f"), "rw-data").expect("write");
        fs::write(root.join("outside/secret"), "secret").expect("write");
        for sub in ["ro", "rox"] {
            let tool = root.join(sub).join("tool");
            fs::copy("/bin/true", &tool).expect("copy true");
            fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Tree { _dir: dir, root }
    }

    fn p(&self, rel: &str) -> String {
        self.root.join(rel).to_str().expect("utf-8").to_string()
    }

    fn rules(&self) -> ResolvedRules {
        let mut rules = base_rules();
        rules.ro.push(self.root.join("ro"));
        rules.rox.push(self.root.join("rox"));
        rules.rw.push(self.root.join("rw"));
        rules
    }

    fn confinement(&self) -> Confinement {
        confine(&self.rules())
    }
}

fn assert_denied(status: ExitStatus, out: &str) {
    assert_ne!(status.code(), 0, "expected failure, got output {out:?}");
    assert!(out.contains(DENIED), "expected EACCES, got {out:?}");
}

#[test]
fn read_outside_all_rules_is_denied() {
    let t = Tree::new();
    let c = t.confinement();
    let (status, out) = sh(&format!("cat {}", t.p("outside/secret")), "/", Some(&c));
    assert_denied(status, &out);
    let (status, out) = sh(&format!("ls {}", t.p("outside")), "/", Some(&c));
    assert_denied(status, &out);
    let (status, out) = sh(&format!("cat {}", t.p("ro/data")), "/", Some(&c));
    assert_eq!((status.code(), out.as_str()), (0, "ro-data"));
}

#[test]
fn write_under_ro_is_denied() {
    let t = Tree::new();
    let c = t.confinement();
    let (status, out) = sh(&format!("echo x > {}", t.p("ro/new")), "/", Some(&c));
    assert_denied(status, &out);
    assert!(!Path::new(&t.p("ro/new")).exists());
    let (status, out) = sh(&format!("echo x > {}", t.p("ro/data")), "/", Some(&c));
    assert_denied(status, &out);
    assert_eq!(fs::read_to_string(t.p("ro/data")).expect("read"), "ro-data");
    let (status, out) = sh(&format!("echo x > {}", t.p("rw/new")), "/", Some(&c));
    assert_eq!((status.code(), out.as_str()), (0, ""));
    assert_eq!(fs::read_to_string(t.p("rw/new")).expect("read"), "x\n");
}

#[test]
fn exec_from_ro_dir_is_denied() {
    let t = Tree::new();
    let c = t.confinement();
    let tool = t.p("ro/tool");
    let err = run(&[&tool], "/", Some(&c)).expect_err("exec from ro must fail");
    assert_eq!(
        err.to_string(),
        format!("cannot start {tool}: Permission denied (os error 13)")
    );
    let (status, out) = sh(&tool, "/", Some(&c));
    assert_denied(status, &out);
    let (status, _) = run(&[&t.p("rox/tool")], "/", Some(&c)).expect("exec from rox");
    assert_eq!(status, ExitStatus::Code(0));
}

#[test]
fn link_and_rename_from_rw_to_ro_are_denied() {
    let t = Tree::new();
    let c = t.confinement();
    let (status, out) = sh(
        &format!("ln {} {}", t.p("rw/f"), t.p("ro/l")),
        "/",
        Some(&c),
    );
    assert_denied(status, &out);
    let (status, out) = sh(
        &format!("mv {} {}", t.p("rw/f"), t.p("ro/m")),
        "/",
        Some(&c),
    );
    assert_denied(status, &out);
    assert!(Path::new(&t.p("rw/f")).exists());
    assert!(!Path::new(&t.p("ro/l")).exists() && !Path::new(&t.p("ro/m")).exists());
    // Within rw, across directories (needs the Refer right), both work.
    let script = format!(
        "mkdir {sub} && ln {f} {sub}/l && mv {f} {sub}/m && cat {sub}/m",
        sub = t.p("rw/sub"),
        f = t.p("rw/f")
    );
    let (status, out) = sh(&script, "/", Some(&c));
    assert_eq!((status.code(), out.as_str()), (0, "rw-data"));
}

#[test]
fn truncating_an_ro_file_is_denied() {
    let t = Tree::new();
    let c = t.confinement();
    assert_eq!(
        run_probe(&["truncate", &t.p("ro/data")], Some(&c)),
        "Permission denied (os error 13)"
    );
    let (status, out) = sh(&format!("truncate -s 0 {}", t.p("ro/data")), "/", Some(&c));
    assert_denied(status, &out);
    assert_eq!(fs::read_to_string(t.p("ro/data")).expect("read"), "ro-data");
    assert_eq!(run_probe(&["truncate", &t.p("rw/f")], Some(&c)), "ok");
    assert_eq!(fs::read_to_string(t.p("rw/f")).expect("read"), "");
}

#[test]
fn symlink_inside_rw_pointing_outside_is_denied() {
    let t = Tree::new();
    std::os::unix::fs::symlink(t.p("outside/secret"), t.p("rw/link")).expect("symlink");
    std::os::unix::fs::symlink(t.p("ro/data"), t.p("rw/inside")).expect("symlink");
    let c = t.confinement();
    let (status, out) = sh(&format!("cat {}", t.p("rw/link")), "/", Some(&c));
    assert_denied(status, &out);
    // Creating one from inside is allowed, following it is not.
    let script = format!(
        "ln -s {} {l} && cat {l}",
        t.p("outside/secret"),
        l = t.p("rw/l2")
    );
    let (status, out) = sh(&script, "/", Some(&c));
    assert_denied(status, &out);
    let (status, out) = sh(&format!("cat {}", t.p("rw/inside")), "/", Some(&c));
    assert_eq!((status.code(), out.as_str()), (0, "ro-data"));
}

#[test]
fn rule_on_a_single_file_grants_only_that_file() {
    let t = Tree::new();
    fs::write(t.p("outside/single"), "single").expect("write");
    let mut rules = t.rules();
    rules.ro.push(PathBuf::from(t.p("outside/single")));
    let c = confine(&rules);
    let (status, out) = sh(&format!("cat {}", t.p("outside/single")), "/", Some(&c));
    assert_eq!((status.code(), out.as_str()), (0, "single"));
    let (status, out) = sh(&format!("cat {}", t.p("outside/secret")), "/", Some(&c));
    assert_denied(status, &out);
}

#[test]
fn abi_limit_degrades_the_applied_ruleset() {
    // With ABI 2 (no truncate control) in best effort, truncate(2) on an ro file is not
    // stopped by Landlock: proof that the limited ruleset is the one applied.
    let t = Tree::new();
    let mut rules = t.rules();
    rules.best_effort = true;
    let c = Confinement::prepare_with_abi_limit(&rules, Some(2)).expect("best effort");
    assert_eq!(c.abi(), 2);
    assert_eq!(run_probe(&["truncate", &t.p("ro/data")], Some(&c)), "ok");
    assert_eq!(fs::read_to_string(t.p("ro/data")).expect("read"), "");
    // Reading outside is still denied (ABI 1 feature).
    let (status, out) = sh(&format!("cat {}", t.p("outside/secret")), "/", Some(&c));
    assert_denied(status, &out);
}

#[test]
fn a_list_only_rule_lists_a_directory_but_reads_nothing_in_it() {
    let t = Tree::new();
    let mut rules = t.rules();
    rules.list.push(t.root.join("outside"));
    let c = confine(&rules);
    let (status, out) = sh(&format!("ls {}", t.p("outside")), "/", Some(&c));
    assert_eq!(status.code(), 0, "{out}");
    assert_eq!(out.trim(), "secret");
    let (status, out) = sh(&format!("cat {}", t.p("outside/secret")), "/", Some(&c));
    assert_denied(status, &out);
    let (status, out) = sh(&format!("touch {}", t.p("outside/new")), "/", Some(&c));
    assert_denied(status, &out);
}
