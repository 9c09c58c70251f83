//! Path variables, `~`, skipping of missing paths, canonicalization, add_exec/ldd.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use toolsrv_sandbox::{PathContext, Policy};

fn canon(p: &Path) -> PathBuf {
    fs::canonicalize(p).expect("canonicalize")
}

fn ctx(cwd: &Path, env: &[(&str, &Path)]) -> PathContext {
    PathContext {
        cwd: cwd.to_path_buf(),
        workdir: None,
        workspace: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect(),
    }
}

fn policy_ro(paths: &[&str]) -> Policy {
    let mut p = Policy::default();
    p.filesystem.ro = paths.iter().map(|s| s.to_string()).collect();
    p
}

#[test]
fn every_variable_expands() {
    let root = tempfile::tempdir().expect("tempdir");
    let r = root.path();
    let env: HashMap<String, String> = [
        ("HOME", r.join("home")),
        ("TMPDIR", r.join("tmp")),
        ("XDG_CONFIG_HOME", r.join("cfg")),
        ("XDG_DATA_HOME", r.join("data")),
        ("XDG_CACHE_HOME", r.join("cache")),
        ("XDG_STATE_HOME", r.join("state")),
        ("XDG_RUNTIME_DIR", r.join("run")),
        ("OLLIE_CFG_PATH", r.join("ocfg")),
        ("OLLIE_DATA_PATH", r.join("odata")),
        ("MY_DIR", r.join("mine")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.display().to_string()))
    .collect();
    let c = PathContext {
        cwd: r.join("cwd"),
        workdir: None,
        workspace: None,
        env,
    };
    for (var, dir) in [
        ("{CWD}", "cwd"),
        ("{HOME}", "home"),
        ("{TMPDIR}", "tmp"),
        ("{XDG_CONFIG_HOME}", "cfg"),
        ("{XDG_DATA_HOME}", "data"),
        ("{XDG_CACHE_HOME}", "cache"),
        ("{XDG_STATE_HOME}", "state"),
        ("{XDG_RUNTIME_DIR}", "run"),
        ("{OLLIE_CFG_PATH}", "ocfg"),
        ("{OLLIE_DATA_PATH}", "odata"),
        ("{MY_DIR}", "mine"),
    ] {
        assert_eq!(
            c.expand(&format!("{var}/sub")),
            Ok(r.join(dir).join("sub")),
            "{var}"
        );
    }
    assert_eq!(c.expand("~"), Ok(r.join("home")));
    assert_eq!(c.expand("~/x/y"), Ok(r.join("home/x/y")));
    assert!(c.expand("~other/x").is_err());
    assert!(c.expand("{UNSET_VARIABLE_XYZ}/x").is_err());
}

#[test]
fn variable_defaults() {
    let home = Path::new("/h/u");
    let c = ctx(Path::new("/w"), &[("HOME", home)]);
    assert_eq!(c.expand("{TMPDIR}"), Ok(PathBuf::from("/tmp")));
    assert_eq!(c.expand("{XDG_CONFIG_HOME}"), Ok(home.join(".config")));
    assert_eq!(c.expand("{XDG_DATA_HOME}"), Ok(home.join(".local/share")));
    assert_eq!(c.expand("{XDG_CACHE_HOME}"), Ok(home.join(".cache")));
    assert_eq!(c.expand("{XDG_STATE_HOME}"), Ok(home.join(".local/state")));
    // Safety: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        c.expand("{XDG_RUNTIME_DIR}"),
        Ok(PathBuf::from(format!("/run/user/{uid}")))
    );
    assert_eq!(c.expand("{OLLIE_CFG_PATH}"), Ok(home.join(".config/ollie")));
    assert_eq!(
        c.expand("{OLLIE_DATA_PATH}"),
        Ok(home.join(".local/share/ollie"))
    );
    let xdg = ctx(
        Path::new("/w"),
        &[("HOME", home), ("XDG_CONFIG_HOME", Path::new("/c"))],
    );
    assert_eq!(
        xdg.expand("{OLLIE_CFG_PATH}"),
        Ok(PathBuf::from("/c/ollie"))
    );
    let no_home = ctx(Path::new("/w"), &[]);
    assert!(no_home.expand("~/x").is_err());
    assert!(no_home.expand("{XDG_CACHE_HOME}").is_err());
}

#[test]
fn resolve_skips_missing_and_canonicalizes_symlinks() {
    let root = tempfile::tempdir().expect("tempdir");
    let r = root.path();
    fs::create_dir_all(r.join("home/real")).expect("mkdir");
    fs::create_dir_all(r.join("cwd")).expect("mkdir");
    std::os::unix::fs::symlink(r.join("home/real"), r.join("home/link")).expect("symlink");
    let c = ctx(&r.join("cwd"), &[("HOME", &r.join("home"))]);
    let mut p = policy_ro(&["~/link", "~/missing", "{UNSET_VARIABLE_XYZ}/a", "{CWD}"]);
    p.filesystem.rw = vec!["{HOME}/real".into(), "{HOME}/link".into()];
    p.filesystem.rox = vec!["/usr".into()];
    p.filesystem.rwx = vec!["{CWD}/nope".into()];
    let rules = p.resolve(&c, &[]);
    assert_eq!(
        rules.ro,
        [canon(&r.join("home/real")), canon(&r.join("cwd"))]
    );
    // The symlink and its target are one path: deduplicated.
    assert_eq!(rules.rw, [canon(&r.join("home/real"))]);
    assert_eq!(rules.rox, [canon(Path::new("/usr"))]);
    assert!(rules.rwx.is_empty());
    assert!(rules.best_effort);
    assert!(rules.network.enabled);
}

#[test]
fn network_and_best_effort_are_copied() {
    let p = Policy::parse(
        "general: {best_effort: false}\nnetwork: {enabled: false, bind_tcp: [8080], connect_tcp: [443]}\n",
        Path::new("t"),
    )
    .expect("parses");
    let rules = p.resolve(&ctx(Path::new("/"), &[]), &[]);
    assert!(!rules.best_effort);
    assert!(!rules.network.enabled);
    assert_eq!(rules.network.bind_tcp, [8080]);
    assert_eq!(rules.network.connect_tcp, [443]);
}

#[test]
fn add_exec_adds_programs_as_rox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("tool.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    let exec = [
        script.clone(),
        PathBuf::from("/bin/sh"),
        dir.path().join("gone"),
    ];
    let mut p = Policy::default();
    let c = ctx(dir.path(), &[]);
    assert!(
        p.resolve(&c, &exec).rox.is_empty(),
        "add_exec off adds nothing"
    );
    p.advanced.add_exec = true;
    let rox = p.resolve(&c, &exec).rox;
    assert_eq!(rox, [canon(&script), canon(Path::new("/bin/sh"))]);
}

#[test]
fn ldd_adds_shared_libraries() {
    let mut p = Policy::default();
    p.advanced.ldd = true;
    let c = ctx(Path::new("/"), &[]);
    let sh = canon(Path::new("/bin/sh"));
    for _ in 0..2 {
        // The second round is served from the (path, mtime) cache.
        let rox = p.resolve(&c, &[PathBuf::from("/bin/sh")]).rox;
        assert!(!rox.contains(&sh), "ldd alone does not add the program");
        assert!(
            rox.iter().any(|l| l
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc."))),
            "libc missing from {rox:?}"
        );
        assert!(
            rox.iter().any(|l| l.to_string_lossy().contains("ld-linux")
                || l.to_string_lossy().contains("ld-musl")),
            "dynamic loader missing from {rox:?}"
        );
    }
    // A script has no shared libraries of its own.
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("t.sh");
    fs::write(&script, "#!/bin/sh\n").expect("write");
    assert!(p.resolve(&c, &[script]).rox.is_empty());
}

#[test]
fn env_passthrough_keeps_allowlist_order_and_set_variables() {
    let p = Policy {
        env: vec![
            "TERM".into(),
            "PATH".into(),
            "UNSET_X".into(),
            "TERM".into(),
        ],
        ..Policy::default()
    };
    let own: HashMap<String, String> = [("PATH", "/usr/bin"), ("TERM", "xterm"), ("SECRET", "s")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        p.env_passthrough(&own),
        [
            ("TERM".to_string(), "xterm".to_string()),
            ("PATH".to_string(), "/usr/bin".to_string())
        ]
    );
}

#[test]
fn private_tmpdir_is_created_private() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let c = ctx(Path::new("/"), &[("TMPDIR", root.path())]);
    let dir = c.expand("{TOOLSRV_TMPDIR}").expect("expands");
    assert!(dir.starts_with(root.path()));
    let meta = fs::symlink_metadata(&dir).expect("created");
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // A symlink planted in its place is not accepted.
    fs::remove_dir(&dir).expect("rmdir");
    std::os::unix::fs::symlink("/", &dir).expect("symlink");
    assert!(c.expand("{TOOLSRV_TMPDIR}").is_err());
}

#[test]
fn the_servers_own_tmpdir_wins_and_an_empty_one_means_none() {
    let root = tempfile::tempdir().expect("tempdir");
    let own = root.path().join("toolsrv-x/123-456");
    std::fs::create_dir_all(&own).expect("mkdir");
    let var = toolsrv_sandbox::SERVER_TMPDIR_VAR;
    let c = ctx(Path::new("/"), &[("TMPDIR", root.path()), (var, &own)]);
    assert_eq!(c.expand("{TOOLSRV_TMPDIR}").expect("expands"), own);
    let c = ctx(
        Path::new("/"),
        &[("TMPDIR", root.path()), (var, Path::new(""))],
    );
    assert!(
        c.expand("{TOOLSRV_TMPDIR}").is_err(),
        "no directory: skipped"
    );
}

#[test]
fn workspace_is_the_opened_base_and_defaults_to_cwd() {
    use std::sync::Arc;
    use toolsrv_sandbox::WorkDir;
    let root = tempfile::tempdir().expect("tempdir");
    let ws = canon(root.path());
    fs::create_dir_all(ws.join("src/deep")).expect("mkdir");
    fs::create_dir_all(ws.join(".git")).expect("mkdir");
    let workspace = Arc::new(WorkDir::open(&ws).expect("open workspace"));
    let workdir = Arc::new(workspace.beneath("src/deep").expect("open cwd"));
    let mut c = ctx(&ws.join("src/deep"), &[]);
    c.workdir = Some(workdir);
    c.workspace = Some(workspace);
    assert_eq!(c.expand("{WORKSPACE}/.git"), Ok(ws.join(".git")));
    let mut p = Policy::default();
    p.filesystem.rwx = vec!["{WORKSPACE}".into(), "{CWD}".into()];
    p.filesystem.ro = vec!["{WORKSPACE}/.git".into(), "{WORKSPACE}/missing".into()];
    let rules = p.resolve(&c, &[]);
    // From a subdirectory, the workspace's root and its `.git` are reached.
    assert_eq!(rules.rwx, [ws.clone(), ws.join("src/deep")]);
    assert_eq!(rules.ro, [ws.join(".git")]);
    assert!(
        rules.ids.contains_key(&ws),
        "the workspace's identity is recorded"
    );
    // A workspace opened through a symbolic link is granted where it is.
    let link = tempfile::tempdir().expect("tempdir");
    let through = link.path().join("ws");
    std::os::unix::fs::symlink(&ws, &through).expect("symlink");
    let mut linked = ctx(&through, &[]);
    linked.workspace = Some(Arc::new(WorkDir::open(&through).expect("open via link")));
    let rules = p.resolve(&linked, &[]);
    assert_eq!(rules.rwx, std::slice::from_ref(&ws));
    assert_eq!(rules.ro, [ws.join(".git")]);
    // Without a workspace, `{WORKSPACE}` is the request's directory.
    let plain = ctx(&ws.join("src"), &[]);
    assert_eq!(plain.expand("{WORKSPACE}"), Ok(ws.join("src")));
}
