//! PolicyStore: embedded fallback, reload on change, broken edits, profiles, write_default.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};
use toolsrv_sandbox::{write_default, Policy, PolicyError, PolicyStore, DEFAULT_POLICY};

/// Writes `text` and moves the mtime forward explicitly so the change is seen
/// even within the filesystem's timestamp granularity.
fn edit(path: &Path, text: &str, step: u64) {
    fs::write(path, text).expect("write");
    let f = fs::File::options().write(true).open(path).expect("open");
    f.set_modified(SystemTime::now() + Duration::from_secs(step))
        .expect("set_modified");
}

fn default_policy() -> Policy {
    Policy::parse(DEFAULT_POLICY, Path::new("d")).expect("default parses")
}

#[test]
fn missing_file_falls_back_to_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sandbox.yaml");
    let store = PolicyStore::open(&path).expect("opens");
    assert_eq!(*store.current(), default_policy());
    assert_eq!(store.path(), Some(path.as_path()));
    // Creating the file later takes effect.
    edit(&path, "network: {enabled: false}\n", 1);
    assert!(!store.current().network.enabled);
    assert!(PolicyStore::embedded_default().path().is_none());
    assert_eq!(*PolicyStore::embedded_default().current(), default_policy());
}

#[test]
fn bad_file_stops_open_with_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sandbox.yaml");
    fs::write(&path, "general:\n  best_effort: true\nbogus: 1\n").expect("write");
    let err = PolicyStore::open(&path).expect_err("bad policy");
    assert!(
        matches!(err, PolicyError::Parse { line: Some(3), .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3: unknown field \"bogus\"", path.display())),
        "{err}"
    );
}

#[test]
fn reload_after_edit_and_broken_edit_keeps_last_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sandbox.yaml");
    fs::write(&path, "network: {enabled: true}\n").expect("write");
    let store = PolicyStore::open(&path).expect("opens");
    let first = store.current();
    assert!(first.network.enabled);
    assert!(
        std::sync::Arc::ptr_eq(&first, &store.current()),
        "unchanged file is not re-parsed"
    );

    edit(&path, "network: {enabled: false}\n", 10);
    assert!(!store.current().network.enabled);

    edit(&path, "network: {enabled: nope\n", 20);
    assert!(
        !store.current().network.enabled,
        "broken edit keeps the last good policy"
    );
    assert!(!store.current().network.enabled);

    edit(&path, "network: {enabled: true, connect_tcp: [443]}\n", 30);
    assert_eq!(store.current().network.connect_tcp, [443]);
}

#[test]
fn profiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sandbox.yaml");
    fs::write(&path, "network: {enabled: true}\n").expect("write");
    fs::create_dir(dir.path().join("sandbox")).expect("mkdir");
    let offline = dir.path().join("sandbox/offline.yaml");
    fs::write(&offline, "network: {enabled: false}\n").expect("write");
    let store = PolicyStore::open(&path).expect("opens");

    assert!(store.profile("default").expect("default").network.enabled);
    assert!(!store.profile("offline").expect("offline").network.enabled);

    let err = store.profile("nosuch").expect_err("unknown");
    assert_eq!(err.to_string(), "unknown sandbox profile \"nosuch\"");

    for bad in [".hidden", "../sandbox", "a/b", "", "x y", "é"] {
        let err = store.profile(bad).expect_err("invalid name");
        assert!(
            matches!(err, PolicyError::InvalidProfileName(_)),
            "{bad}: {err:?}"
        );
        assert!(
            err.to_string().starts_with("invalid sandbox profile name"),
            "{err}"
        );
    }

    // Re-read on change; a broken edit keeps the last good version.
    edit(
        &offline,
        "network: {enabled: false, bind_tcp: [9000]}\n",
        10,
    );
    assert_eq!(
        store.profile("offline").expect("offline").network.bind_tcp,
        [9000]
    );
    edit(&offline, "network: [\n", 20);
    assert_eq!(
        store.profile("offline").expect("offline").network.bind_tcp,
        [9000]
    );

    // A profile that never parsed reports its error.
    let broken = dir.path().join("sandbox/broken.yaml");
    fs::write(&broken, "filesystem:\n  rox: [1, 2\n").expect("write");
    let err = store.profile("broken").expect_err("broken");
    assert!(
        err.to_string().starts_with(&broken.display().to_string()),
        "{err}"
    );

    // Removing a profile makes it unknown.
    fs::remove_file(&offline).expect("rm");
    assert_eq!(
        store.profile("offline").expect_err("gone").to_string(),
        "unknown sandbox profile \"offline\""
    );
}

#[test]
fn write_default_only_when_absent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("cfg");
    let written = write_default(&target).expect("writes");
    let path = target.join("sandbox.yaml");
    assert_eq!(written.as_deref(), Some(path.as_path()));
    assert_eq!(fs::read_to_string(&path).expect("read"), DEFAULT_POLICY);
    fs::write(&path, "env: []\n").expect("write");
    assert_eq!(write_default(&target).expect("no-op"), None);
    assert_eq!(PolicyStore::write_default(&target).expect("no-op"), None);
    assert_eq!(fs::read_to_string(&path).expect("read"), "env: []\n");
}

#[test]
fn store_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PolicyStore>();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sandbox.yaml");
    fs::write(&path, "env: [PATH]\n").expect("write");
    let store = PolicyStore::open(&path).expect("opens");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    assert_eq!(store.current().env, ["PATH"]);
                }
            });
        }
    });
}
