//! The quarantine on real directories: same filesystem (a rename) and
//! across filesystems (a copy), links never followed, a racing swap of a
//! parent for a link refused.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use toolsrv_watch::{CopyLimits, EntryKind, How, Quarantine, QuarantineError};

fn tmp_in(dir: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("toolsrv-quarantine-test-")
        .tempdir_in(dir)
        .expect("tempdir")
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).expect("canonicalize")
}

#[test]
fn a_file_a_tree_and_a_symlink_are_moved_with_a_record() {
    let ws = tmp_in("/dev/shm");
    let state = tmp_in("/dev/shm");
    let ws = canon(ws.path());
    let q = Quarantine::new(state.path()).expect("quarantine");
    std::fs::write(ws.join(".mcp.json"), "{}").expect("file");
    std::fs::create_dir_all(ws.join("sub/.git/hooks")).expect("tree");
    std::fs::write(ws.join("sub/.git/hooks/post-commit"), "#!/bin/sh\nevil\n").expect("hook");
    symlink("/etc/passwd", ws.join("sub/.git/hooks/link")).expect("inner link");
    std::fs::write(ws.join("target"), "the target").expect("target");
    symlink(ws.join("target"), ws.join("link")).expect("link");

    let f = q.move_in(&ws.join(".mcp.json")).expect("file");
    assert_eq!((f.kind, f.how), (EntryKind::File, How::Rename));
    assert!(!ws.join(".mcp.json").exists());
    assert_eq!(std::fs::read_to_string(&f.path).expect("moved"), "{}");

    let t = q.move_in(&ws.join("sub/.git")).expect("tree");
    assert_eq!(t.kind, EntryKind::Directory);
    assert!(!ws.join("sub/.git").exists());
    assert!(t.path.join("hooks/post-commit").is_file());
    assert!(t
        .path
        .join("hooks/link")
        .symlink_metadata()
        .expect("inner")
        .is_symlink());

    let l = q.move_in(&ws.join("link")).expect("link");
    assert_eq!(l.kind, EntryKind::Symlink);
    assert!(l.path.symlink_metadata().expect("moved link").is_symlink());
    assert_eq!(
        std::fs::read_to_string(ws.join("target")).expect("target stays"),
        "the target"
    );

    let listed = q.list().expect("list");
    let originals: Vec<PathBuf> = listed.iter().map(|r| r.original_path()).collect();
    assert_eq!(
        originals,
        vec![ws.join(".mcp.json"), ws.join("sub/.git"), ws.join("link")]
    );
    // The record beside the entry is JSON naming the original.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&listed[0].record).expect("record")).expect("json");
    assert_eq!(json["original"], ws.join(".mcp.json").display().to_string());
    assert_eq!(json["how"], "rename");
    assert!(matches!(
        q.move_in(&ws.join(".mcp.json")),
        Err(QuarantineError::Missing(_))
    ));
}

#[test]
fn a_symlink_in_the_parent_is_refused_not_followed() {
    let ws = tmp_in("/dev/shm");
    let outside = tmp_in("/dev/shm");
    let state = tmp_in("/dev/shm");
    let ws = canon(ws.path());
    let q = Quarantine::new(state.path()).expect("quarantine");
    std::fs::write(outside.path().join("secret"), "outside").expect("secret");
    // A tool swapped `d` for a link to a directory outside.
    symlink(outside.path(), ws.join("d")).expect("link");
    let e = q.move_in(&ws.join("d/secret")).expect_err("refused");
    assert!(matches!(e, QuarantineError::NotFollowed { .. }), "{e}");
    assert!(outside.path().join("secret").exists());
    assert!(matches!(
        q.move_in(Path::new("relative/x")),
        Err(QuarantineError::NotAbsolute(_))
    ));
    assert!(matches!(
        q.move_in(&ws.join("a/../b")),
        Err(QuarantineError::NotAbsolute(_))
    ));
}

/// A tool swaps a directory of the path with a link to another directory
/// as fast as it can while the server quarantines: nothing of the other
/// directory is ever moved.
#[test]
fn a_racing_swap_of_a_parent_for_a_link_never_moves_what_it_points_to() {
    let ws = tmp_in("/dev/shm");
    let outside = tmp_in("/dev/shm");
    let state = tmp_in("/dev/shm");
    let ws = canon(ws.path());
    let q = Quarantine::new(state.path()).expect("quarantine");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ws2, out2, stop2) = (ws.clone(), outside.path().to_path_buf(), stop.clone());
    let racer = std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            i += 1;
            let _ = std::fs::write(out2.join("secret"), "outside");
            let d = ws2.join("d");
            let _ = std::fs::remove_file(&d);
            let _ = std::fs::remove_dir_all(&d);
            if i.is_multiple_of(2) {
                let _ = std::fs::create_dir(&d);
                let _ = std::fs::write(d.join("secret"), "inside");
            } else {
                let _ = symlink(&out2, &d);
            }
        }
    });
    let mut moved = 0;
    for _ in 0..2000 {
        if let Ok(r) = q.move_in(&ws.join("d/secret")) {
            moved += 1;
            // ("" when moved between the racer's create and write.)
            assert_ne!(
                std::fs::read_to_string(&r.path).unwrap_or_default(),
                "outside"
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    racer.join().expect("racer");
    for r in q.list().expect("list") {
        assert_ne!(
            std::fs::read_to_string(&r.path).unwrap_or_default(),
            "outside",
            "{r:?}"
        );
    }
    assert!(moved > 0, "the race never let a move through: not a test");
}

#[test]
fn across_filesystems_the_entry_is_copied_then_removed() {
    let ws = tmp_in("/dev/shm");
    let state = tmp_in("/tmp");
    let ws = canon(ws.path());
    let q = Quarantine::new(state.path()).expect("quarantine");
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("tree");
    std::fs::write(ws.join(".git/hooks/pre-commit"), "evil").expect("hook");
    symlink("/etc/passwd", ws.join(".git/link")).expect("link");
    let r = q.move_in(&ws.join(".git")).expect("copied");
    assert_eq!(
        (r.kind, r.how, r.truncated),
        (EntryKind::Directory, How::Copy, false)
    );
    assert!(!ws.join(".git").exists());
    assert_eq!(
        std::fs::read_to_string(r.path.join("hooks/pre-commit")).expect("hook"),
        "evil"
    );
    assert_eq!(
        std::fs::read_link(r.path.join("link")).expect("link"),
        Path::new("/etc/passwd")
    );
    // Beyond the limits, the copy is marked truncated and the original still goes.
    let q = Quarantine::new(state.path())
        .expect("again")
        .with_limits(CopyLimits {
            bytes: 4,
            entries: 100,
            depth: 8,
        });
    std::fs::write(ws.join("big"), "0123456789").expect("big");
    let r = q.move_in(&ws.join("big")).expect("copied");
    assert!(r.truncated);
    assert!(!ws.join("big").exists());
    assert_eq!(std::fs::read_to_string(&r.path).expect("kept"), "0123");
}

#[test]
fn a_state_directory_that_is_a_symlink_is_refused() {
    let base = tmp_in("/dev/shm");
    let elsewhere = tmp_in("/dev/shm");
    symlink(elsewhere.path(), base.path().join("state")).expect("link");
    assert!(Quarantine::new(&base.path().join("state")).is_err());
    std::fs::create_dir(base.path().join("s2")).expect("s2");
    symlink(elsewhere.path(), base.path().join("s2/quarantine")).expect("link");
    assert!(Quarantine::new(&base.path().join("s2")).is_err());
    assert!(Quarantine::new(&base.path().join("s3")).is_ok());
}

#[test]
fn two_quarantines_on_one_directory_never_share_a_record() {
    let ws = tmp_in("/dev/shm");
    let state = tmp_in("/dev/shm");
    let ws = canon(ws.path());
    let (a, b) = (
        Quarantine::new(state.path()).expect("a"),
        Quarantine::new(state.path()).expect("b"),
    );
    for i in 0..50 {
        std::fs::write(ws.join(format!("a{i}")), "a").expect("a");
        std::fs::write(ws.join(format!("b{i}")), "b").expect("b");
        a.move_in(&ws.join(format!("a{i}"))).expect("move a");
        b.move_in(&ws.join(format!("b{i}"))).expect("move b");
    }
    let listed = a.list().expect("list");
    assert_eq!(listed.len(), 100);
    for r in &listed {
        let name = r.original_path();
        let first = name.file_name().unwrap().to_string_lossy().chars().next();
        let content = std::fs::read_to_string(&r.path).expect("entry");
        assert_eq!(first.map(String::from), Some(content), "{r:?}");
    }
}
