//! Discovery: ignore rules, fresh reads, cache invalidation, ordering.

use std::fs;
use std::time::{Duration, SystemTime};

use crate::common::{exe, linux, plain};
use toolsrv_metadata::Catalog;

fn names(cat: &Catalog) -> Vec<String> {
    cat.all().into_iter().map(|t| t.name).collect()
}

#[test]
fn all_is_sorted_and_has_descriptions() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(
        dir.path(),
        "zeta.yaml",
        "description: last\ncommand: echo z\n",
    );
    exe(
        dir.path(),
        "alpha",
        "#!/bin/sh\n# ---\n# description: first\n# ---\n",
    );
    plain(
        dir.path(),
        "mid.yaml",
        "description: middle\ncommand: echo m\n",
    );
    exe(dir.path(), "Upper", "#!/bin/sh\n");
    let cat = linux(dir.path());
    let all = cat.all();
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|t| (t.name.as_str(), t.description.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Upper", ""),
            ("alpha", "first"),
            ("mid", "middle"),
            ("zeta", "last")
        ]
    );
    assert_eq!(cat.dir(), dir.path());
}

#[test]
fn dotfiles_backups_and_subdirectories_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(dir.path(), "real", "#!/bin/sh\n");
    exe(dir.path(), ".hidden", "#!/bin/sh\n");
    plain(dir.path(), ".secret.yaml", "command: echo\n");
    exe(dir.path(), "real~", "#!/bin/sh\n");
    plain(dir.path(), "other.yaml~", "command: echo\n");
    fs::create_dir(dir.path().join("subdir")).expect("mkdir");
    exe(&dir.path().join("subdir"), "inner", "#!/bin/sh\n");
    fs::create_dir(dir.path().join("dir.yaml")).expect("mkdir");
    let cat = linux(dir.path());
    assert_eq!(names(&cat), vec!["real"]);
    for name in [".hidden", ".secret", "real~", "subdir", "inner", "dir"] {
        assert_eq!(
            cat.resolve(name).expect_err(name).to_string(),
            format!("unknown tool \"{name}\"")
        );
    }
}

#[test]
fn bad_files_are_listed_with_their_error_and_resolve_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    plain(dir.path(), "good.yaml", "command: echo ok\n");
    let bad = plain(dir.path(), "bad.yaml", "command: echo\nnope: 1\n");
    let cat = linux(dir.path());
    assert_eq!(names(&cat), vec!["bad", "good"]);
    let e = cat.resolve("bad").expect_err("bad").to_string();
    assert!(
        e.starts_with(&format!("{}:2: unknown field \"nope\"", bad.display())),
        "{e}"
    );
    let all = cat.all();
    assert_eq!(
        (all[0].description.as_str(), all[0].error.as_deref()),
        ("", Some(e.as_str()))
    );
    assert_eq!(all[1].error, None);
    assert_eq!(
        cat.resolve("missing").expect_err("missing").to_string(),
        "unknown tool \"missing\""
    );
    assert_eq!(
        cat.resolve("../etc/passwd").expect_err("path").to_string(),
        "unknown tool \"../etc/passwd\""
    );
}

#[test]
fn missing_directory_lists_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cat = linux(&dir.path().join("absent"));
    assert!(cat.all().is_empty());
    assert!(cat.resolve("x").is_err());
}

#[test]
fn tool_added_later_shows_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(dir.path(), "first", "#!/bin/sh\n");
    let cat = linux(dir.path());
    assert_eq!(names(&cat), vec!["first"]);
    plain(dir.path(), "second.yaml", "command: echo 2\n");
    assert_eq!(names(&cat), vec!["first", "second"]);
    assert!(cat.resolve("second").is_ok());
    fs::remove_file(dir.path().join("first")).expect("rm");
    assert_eq!(names(&cat), vec!["second"]);
    assert!(cat.resolve("first").is_err());
}

#[test]
fn cache_sees_same_size_change_with_new_mtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = plain(dir.path(), "t.yaml", "description: aaaa\ncommand: echo\n");
    let cat = linux(dir.path());
    assert_eq!(cat.all()[0].description, "aaaa");
    assert_eq!(cat.resolve("t").expect("t").description, "aaaa");
    // Same size, written in place, then given a clearly different mtime.
    fs::write(&path, "description: bbbb\ncommand: echo\n").expect("rewrite");
    let file = fs::File::options().write(true).open(&path).expect("open");
    file.set_modified(SystemTime::now() + Duration::from_secs(10))
        .expect("set mtime");
    drop(file);
    assert_eq!(cat.all()[0].description, "bbbb");
    assert_eq!(cat.resolve("t").expect("t").description, "bbbb");
}

#[test]
fn cache_sees_size_change_and_chmod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = exe(
        dir.path(),
        "s",
        "#!/bin/sh\n# ---\n# description: one\n# ---\n",
    );
    let cat = linux(dir.path());
    assert_eq!(cat.resolve("s").expect("s").description, "one");
    let mtime = fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    fs::write(
        &path,
        "#!/bin/sh\n# ---\n# description: number two\n# ---\n",
    )
    .expect("rewrite");
    // Even with the old mtime restored, the size differs.
    let file = fs::File::options().write(true).open(&path).expect("open");
    file.set_modified(mtime).expect("restore mtime");
    drop(file);
    assert_eq!(cat.all()[0].description, "number two");
    // Losing the execute bit turns it into a non-tool.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(cat.all().is_empty());
}

#[test]
fn sidecar_change_invalidates_script_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    exe(
        dir.path(),
        "t",
        "#!/bin/sh\n# ---\n# description: header\n# ---\n",
    );
    let cat = linux(dir.path());
    assert_eq!(cat.all()[0].description, "header");
    plain(dir.path(), "t.yaml", "description: sidecar\n");
    assert_eq!(cat.all()[0].description, "sidecar");
    fs::remove_file(dir.path().join("t.yaml")).expect("rm");
    assert_eq!(cat.resolve("t").expect("t").description, "header");
}

#[test]
fn catalog_shared_between_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..20 {
        plain(dir.path(), &format!("t{i:02}.yaml"), "command: echo\n");
    }
    let cat = std::sync::Arc::new(linux(dir.path()));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let cat = cat.clone();
            std::thread::spawn(move || cat.all().len())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("thread"), 20);
    }
}

/// Not a timing assertion: prints the median time of `all` over 1,000
/// unchanged tool files (run with `--nocapture`) and checks the listing.
#[test]
fn all_over_1000_tools_timing() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..1000 {
        if i % 2 == 0 {
            plain(
                dir.path(),
                &format!("tool{i:04}.yaml"),
                "description: generated\nparams:\n  a: {type: string, required: true}\ncommand: echo {a}\n",
            );
        } else {
            exe(
                dir.path(),
                &format!("tool{i:04}"),
                "#!/bin/sh\n# ---\n# description: generated\n# ---\necho\n",
            );
        }
    }
    let cat = linux(dir.path());
    let cold = std::time::Instant::now();
    assert_eq!(cat.all().len(), 1000);
    let cold = cold.elapsed();
    let mut times: Vec<Duration> = (0..21)
        .map(|_| {
            let t = std::time::Instant::now();
            let n = cat.all().len();
            let e = t.elapsed();
            assert_eq!(n, 1000);
            e
        })
        .collect();
    times.sort();
    println!(
        "all() over 1000 tools: first (parsing) {:?}, cached median {:?} (min {:?}, max {:?})",
        cold, times[10], times[0], times[20]
    );
}
