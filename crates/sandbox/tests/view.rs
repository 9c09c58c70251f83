//! The filesystem view, entered by a real child (`setns`), without Landlock:
//! what the mounts alone guarantee (as root, DAC refuses nothing, so every
//! refusal here is the view's).

use std::path::{Path, PathBuf};

use crate::spawn_support::sh_in_view as sh_in;
use toolsrv_sandbox::ExitStatus;
use toolsrv_sandbox::PathContext;
use toolsrv_sandbox::{RulePaths, ServerFiles, Sources, View};

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        Tree { _dir: dir, root }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// `writable` plus what a shell needs to run (`/usr`, `/etc` and the links
/// `/bin`, `/lib`, `/lib64` where they are links).
fn system_rules(writable: Vec<PathBuf>) -> RulePaths {
    let named = ["/usr", "/etc", "/bin", "/lib", "/lib64"];
    RulePaths {
        writable,
        readable: named
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect(),
        links: named
            .iter()
            .flat_map(|p| toolsrv_sandbox::links_along(Path::new(p)))
            .collect(),
        cow: Vec::new(),
    }
}

fn view_for(t: &Tree, ws: &Path, server: ServerFiles) -> View {
    let src = Sources {
        ctx: PathContext {
            cwd: ws.to_path_buf(),
            workdir: None,
            workspace: None,
            env: [("HOME".to_string(), t.p("home").display().to_string())].into(),
        },
        workspace: ws.to_path_buf(),
        server,
        deny_read: vec![t.p("ws/**/*.pem")],
        deny_write: Vec::new(),
        rules: system_rules(vec![ws.to_path_buf()]),
        layers: None,
    };
    View::build(&src, &[]).expect("build the view")
}

#[test]
fn the_view_masks_pins_and_makes_the_rest_read_only() {
    let t = Tree::new();
    t.write("ws/src/main.c", "int main;\n");
    t.write("ws/.git/config", "[core]\n");
    t.write("ws/.git/hooks/pre-commit.sample", "#!/bin/sh\n");
    t.write("ws/secret.txt", "TOP-SECRET\n");
    t.write("ws/deep/key.pem", "PEM-SECRET\n");
    t.write("outside/file.txt", "outside\n");
    std::fs::create_dir_all(t.p("home")).unwrap();
    let ws = t.p("ws");
    let server = ServerFiles {
        hidden: vec![t.p("ws/secret.txt")],
        read_only: Vec::new(),
        shown: Vec::new(),
        registry: None,
    };
    let view = view_for(&t, &ws, server);
    let outside = t.p("outside/file.txt").display().to_string();
    let script = format!(
        "cat secret.txt; echo '|'; cat deep/key.pem; echo '|'; \
         echo new > new.txt && echo created; mkdir sub && echo mkdir; \
         echo '[user]' >> .git/config && echo config-rw; \
         touch .git/hooks/pre-commit || echo hooks-ro; \
         mv .git .git2 || echo pinned; \
         echo x > secret.txt || echo secret-ro; \
         test -e {outside} || echo outside-absent; \
         test -e /run || echo run-absent"
    );
    let (status, out) = sh_in(&view, &script);
    assert_eq!(status, ExitStatus::Code(0), "{out}");
    for want in [
        "created",
        "mkdir",
        "config-rw",
        "hooks-ro",
        "pinned",
        "secret-ro",
        "outside-absent",
        "run-absent",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    assert!(!out.contains("SECRET"), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(t.p("ws/new.txt").exists() && t.p("ws/sub").is_dir());
    assert!(t.p("ws/.git").is_dir() && !t.p("ws/.git2").exists());
    assert_eq!(
        std::fs::read_to_string(t.p("ws/.git/config")).unwrap(),
        "[core]\n[user]\n",
        "a repository's config is writable in the view (the server's guard checks what a tool writes there)"
    );
    assert!(!t.p("ws/.git/hooks/pre-commit").exists());
    // No placeholders: nothing was created on the host to protect a path.
    assert!(!t.p("ws/.claude").exists() && !t.p("ws/.mcp.json").exists());
    assert!(view.plan().creatable.contains(&t.p("ws/.claude")));
    // The host is untouched by the view's mounts.
    assert_eq!(
        std::fs::read_to_string(t.p("ws/secret.txt")).unwrap(),
        "TOP-SECRET\n"
    );
}
