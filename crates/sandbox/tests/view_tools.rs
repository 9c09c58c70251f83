//! A view built while a root server's tools' user namespace is in force
//! (`identity::tools`), entered by a real child that joins the namespace:
//! without Landlock, what the ids and the id-mapped binds alone give. Its
//! own test binary: the namespace is put in force once per process.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::spawn_support::sh_in_view as sh_in;
use toolsrv_sandbox::ExitStatus;
use toolsrv_sandbox::PathContext;
use toolsrv_sandbox::{tools, ToolNamespace};
use toolsrv_sandbox::{RulePaths, ServerFiles, Sources, View};

fn write(p: &Path, text: &str, mode: u32, owner: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    std::os::unix::fs::chown(p, Some(owner), Some(owner)).unwrap();
}

#[test]
fn tools_in_their_own_user_namespace_read_by_permission_and_write_as_root() {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let base = tools::choose_base().expect("a free range");
    let ns = Arc::new(ToolNamespace::create(base).expect("the tools' namespace"));
    assert!(tools::put_in_force(ns));
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let conf = root.join("conf");
    write(&conf.join("open"), "open\n", 0o644, 0);
    write(&conf.join("key"), "KEY-SECRET\n", 0o600, 0);
    write(&conf.join("theirs"), "THEIR-SECRET\n", 0o600, 4321);
    write(&conf.join("named"), "named\n", 0o600, 0);
    write(&ws.join("u1000"), "u\n", 0o600, 1000);
    let named = ["/usr", "/etc", "/bin", "/lib", "/lib64"];
    let mut readable: Vec<PathBuf> = named
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    readable.extend([conf.clone(), conf.join("named")]);
    let src = Sources {
        ctx: PathContext {
            cwd: ws.clone(),
            workdir: None,
            workspace: None,
            env: Default::default(),
        },
        workspace: ws.clone(),
        server: ServerFiles::default(),
        deny_read: Vec::new(),
        deny_write: Vec::new(),
        rules: RulePaths {
            writable: vec![ws.clone()],
            readable,
            links: named
                .iter()
                .flat_map(|p| toolsrv_sandbox::links_along(Path::new(p)))
                .collect(),
            cow: Vec::new(),
        },
        layers: None,
    };
    let view = View::build(&src, &[]).expect("build the view");
    assert!(view.user_ns().is_some());
    assert!(
        view.not_id_mapped().is_empty(),
        "{:?}",
        view.not_id_mapped()
    );
    let c = conf.display();
    let script = format!(
        "id -u; id -g; cat {c}/open; cat {c}/named; cat {c}/key || echo key-refused; \
         cat {c}/theirs || echo theirs-refused; echo new > made; echo more >> u1000; \
         chown 1000:1000 made && stat -c %u:%g made u1000"
    );
    let (status, out) = sh_in(&view, &script);
    assert_eq!(status, ExitStatus::Code(0), "{out}");
    assert!(!out.contains("SECRET"), "{out}");
    for want in [
        "0\n0\nopen\nnamed\n",
        "key-refused",
        "theirs-refused",
        "1000:1000\n1000:1000\n",
    ] {
        assert!(out.contains(want), "{want:?} missing: {out}");
    }
    let m = std::fs::metadata(ws.join("made")).unwrap();
    assert_eq!(m.uid(), 1000, "chowned on the host too");
    assert_eq!(
        std::fs::read_to_string(ws.join("u1000")).unwrap(),
        "u\nmore\n"
    );
    // A new file is root's on the host.
    let (status, out) = sh_in(&view, "mkdir d && touch d/f");
    assert_eq!(status, ExitStatus::Code(0), "{out}");
    for p in ["d", "d/f"] {
        let m = std::fs::metadata(ws.join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (0, 0), "{p}");
    }
}
