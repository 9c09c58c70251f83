//! The guard against real repositories built with the real `git`: the
//! everyday commands add no finding, every dangerous key git itself writes
//! is found, and where it is cheap the test proves a finding matters by
//! letting git run the marker command the tool would have planted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use toolsrv_gitguard::{
    check_config_change, inspect, inspect_with, looks_like_git_dir, Finding, InspectOptions,
    Inspection, Kind, Limits, Scope, When, RULES,
};

/// A workspace in a temporary directory, and git run in it as the human
/// (no system or global config, a fixed identity).
struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        // Canonical, so that the workspace compares with what git writes.
        let canon = dir.path().canonicalize().unwrap();
        assert_eq!(canon, dir.path(), "a temporary directory without links");
        Ws { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn run(&self, cwd: &str, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(self.path(cwd))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "Human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .output()
            .expect("git runs")
    }

    /// Runs git and requires success.
    fn git(&self, cwd: &str, args: &[&str]) -> String {
        let out = self.run(cwd, args);
        assert!(
            out.status.success(),
            "git {args:?} in {cwd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    fn executable(&self, rel: &str, script: &str) {
        use std::os::unix::fs::PermissionsExt;
        self.write(rel, format!("#!/bin/sh\n{script}\n"));
        std::fs::set_permissions(self.path(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A command that leaves a marker file, and the marker's path.
    fn marker(&self, name: &str) -> (String, PathBuf) {
        let m = self.path(&format!("marker-{name}"));
        (format!("touch {}", m.display()), m)
    }

    /// A repository with one commit on `main`.
    fn repo(&self, rel: &str) {
        self.git(".", &["init", "-q", "-b", "main", rel]);
        self.write(&format!("{rel}/README"), "hello\n");
        self.git(rel, &["add", "README"]);
        self.git(rel, &["commit", "-q", "-m", "first"]);
    }

    fn options(&self) -> InspectOptions {
        InspectOptions {
            workspace: Some(self.root().to_path_buf()),
            ..InspectOptions::default()
        }
    }

    fn inspect(&self, rel: &str) -> Inspection {
        inspect_with(&self.path(rel), &self.options())
    }
}

fn keys(f: &[Finding]) -> Vec<String> {
    f.iter().map(|f| f.key.clone()).collect()
}

fn has(i: &Inspection, kind: Kind, key: &str) -> bool {
    i.findings.iter().any(|f| f.kind == kind && f.key == key)
}

/// Runs `cmd` in `ws` and requires that the change it makes to the config of
/// `git_dir` (relative) is no finding.
fn everyday(ws: &Ws, git_dir: &str, cwd: &str, args: &[&str]) {
    let config = format!("{git_dir}/config");
    let before = std::fs::read(ws.path(&config)).ok();
    ws.git(cwd, args);
    let after = ws.read(&config);
    let git_dir = ws.path(git_dir);
    let scope = Scope {
        git_dir: &git_dir,
        workspace: ws.root(),
    };
    let f = check_config_change(before.as_deref(), &after, Some(&scope));
    assert!(f.is_empty(), "git {args:?}: {f:#?}");
}

#[test]
fn everyday_git_adds_no_finding() {
    let ws = Ws::new();
    ws.git(".", &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    ws.repo("lib");
    everyday(&ws, "w/.git", ".", &["init", "-q", "-b", "main", "w"]);
    everyday(
        &ws,
        "w/.git",
        "w",
        &["config", "user.email", "tool@example.com"],
    );
    everyday(&ws, "w/.git", "w", &["config", "user.name", "Tool"]);
    everyday(
        &ws,
        "w/.git",
        "w",
        &["remote", "add", "origin", "../origin.git"],
    );
    ws.write("w/a.txt", "a\n");
    everyday(&ws, "w/.git", "w", &["add", "a.txt"]);
    everyday(&ws, "w/.git", "w", &["commit", "-q", "-m", "a"]);
    everyday(&ws, "w/.git", "w", &["push", "-q", "-u", "origin", "main"]);
    everyday(&ws, "w/.git", "w", &["fetch", "-q", "origin"]);
    everyday(&ws, "w/.git", "w", &["branch", "-u", "origin/main"]);
    everyday(&ws, "w/.git", "w", &["checkout", "-q", "-b", "feature"]);
    ws.write("w/b.txt", "b\n");
    everyday(&ws, "w/.git", "w", &["add", "b.txt"]);
    everyday(&ws, "w/.git", "w", &["commit", "-q", "-m", "b"]);
    ws.write("w/b.txt", "b changed\n");
    everyday(&ws, "w/.git", "w", &["stash", "-q"]);
    everyday(&ws, "w/.git", "w", &["stash", "pop", "-q"]);
    everyday(&ws, "w/.git", "w", &["stash", "-q"]);
    everyday(&ws, "w/.git", "w", &["checkout", "-q", "main"]);
    ws.write("w/c.txt", "c\n");
    everyday(&ws, "w/.git", "w", &["add", "c.txt"]);
    everyday(&ws, "w/.git", "w", &["commit", "-q", "-m", "c"]);
    everyday(&ws, "w/.git", "w", &["checkout", "-q", "feature"]);
    everyday(&ws, "w/.git", "w", &["rebase", "-q", "main"]);
    everyday(&ws, "w/.git", "w", &["checkout", "-q", "main"]);
    everyday(&ws, "w/.git", "w", &["merge", "-q", "--no-edit", "feature"]);
    everyday(&ws, "w/.git", "w", &["tag", "v1"]);
    everyday(&ws, "w/.git", "w", &["branch", "-m", "feature", "topic"]);
    everyday(
        &ws,
        "w/.git",
        "w",
        &["remote", "rename", "origin", "upstream"],
    );
    everyday(&ws, "w/.git", "w", &["init", "-q"]);
    everyday(
        &ws,
        "w/.git",
        "w",
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "-q",
            "add",
            "../lib",
            "sub",
        ],
    );
    everyday(&ws, "w/.git", "w", &["commit", "-q", "-m", "sub"]);
    everyday(&ws, "w/.git", "w", &["worktree", "add", "-q", "../wt"]);
    everyday(&ws, "w/.git", "w", &["gc", "-q"]);
    everyday(&ws, "w/.git", "w", &["sparse-checkout", "init", "--cone"]);
    everyday(&ws, "w/.git", "w", &["sparse-checkout", "disable"]);
    // New repositories: everything they carry counts.
    everyday(
        &ws,
        "clone/.git",
        ".",
        &["clone", "-q", "origin.git", "clone"],
    );
    everyday(
        &ws,
        "sep.git",
        ".",
        &["init", "-q", "--separate-git-dir", "sep.git", "w2"],
    );
    everyday(
        &ws,
        "w/.git/modules/sub",
        "w",
        &["submodule", "-q", "update", "--init"],
    );
    everyday(
        &ws,
        "w/.git/modules/sub",
        "w/sub",
        &["config", "user.name", "Tool"],
    );
    // config.worktree, written by sparse-checkout.
    let cw = ws.read("w/.git/config.worktree");
    assert!(check_config_change(None, &cw, None).is_empty());
    for repo in ["w", "wt", "w/sub", "clone", "w2", "lib", "origin.git"] {
        let i = ws.inspect(repo);
        assert!(i.is_clean(), "{repo}: {:#?}", i.findings);
    }
    let i = ws.inspect("w");
    assert!(
        i.git_dirs.iter().any(|d| d.ends_with("modules/sub")),
        "{:?}",
        i.git_dirs
    );
    assert!(
        i.git_dirs.iter().any(|d| d.ends_with("worktrees/wt")),
        "{:?}",
        i.git_dirs
    );
}

/// A key name for each table pattern, as a tool would write it with `git
/// config` (`diff.<driver>.command` becomes `diff.x.command`; an optional
/// subsection gives both forms).
fn sample_keys(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let with_sub = |s: &str| {
        let mut s = s.replace("[.", ".").replace("].", ".");
        while let (Some(a), Some(b)) = (s.find('<'), s.find('>')) {
            let inner = &s[a + 1..b];
            let sub = match inner.split_once('.') {
                Some((prefix, _)) => format!("{prefix}.x"),
                None => "x".to_string(),
            };
            s.replace_range(a..=b, &sub);
        }
        s
    };
    let fix = |s: String| {
        let s = s
            .strip_prefix("*")
            .map_or(s.clone(), |rest| format!("diff{rest}"));
        s.strip_suffix(".*")
            .map_or(s.clone(), |rest| format!("{rest}.clean"))
    };
    out.push(fix(with_sub(pattern)));
    if let (Some(a), Some(b)) = (pattern.find("[."), pattern.find("].")) {
        let mut without = pattern.to_string();
        without.replace_range(a..=b, "");
        out.push(fix(with_sub(&without)));
    }
    out
}

#[test]
fn every_dangerous_key_written_by_git_config_is_found() {
    let ws = Ws::new();
    ws.repo("w");
    let pristine = ws.read("w/.git/config");
    let git_dir = ws.path("w/.git");
    let scope = Scope {
        git_dir: &git_dir,
        workspace: ws.root(),
    };
    let mut checked = 0;
    for rule in RULES {
        for key in sample_keys(rule.pattern) {
            let (hit, miss): (&[&str], Vec<&str>) = match rule.when {
                When::Always => (&["cmd --flag"], vec![]),
                When::UnlessOneOf(harmless) => (&["cmd --flag"], harmless.to_vec()),
                When::UnlessBooleanOr(harmless) => {
                    (&["cmd --flag"], [&["false", "true"], harmless].concat())
                }
                When::Bang => (&["!cmd"], vec!["rebase"]),
                When::OutsideWorkspace(_) => (&["/elsewhere"], vec!["."]),
                When::Never => (&[], vec!["cmd --flag"]),
            };
            for (value, want) in hit
                .iter()
                .map(|v| (v, true))
                .chain(miss.iter().map(|v| (v, false)))
            {
                ws.write("w/.git/config", &pristine);
                ws.git("w", &["config", "--add", &key, value]);
                let after = ws.read("w/.git/config");
                let f = check_config_change(Some(&pristine), &after, Some(&scope));
                let found = f.iter().any(|f| f.key.eq_ignore_ascii_case(&key));
                assert_eq!(found, want, "{key} = {value} ({}): {f:#?}", rule.pattern);
                if want {
                    assert_eq!(f.len(), 1, "{key}: {f:#?}");
                    assert_eq!(f[0].reason, rule.reason);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > RULES.len(), "{checked}");
}

#[test]
fn hand_written_hostile_configs_are_found() {
    let ws = Ws::new();
    ws.repo("w");
    let pristine = ws.read("w/.git/config");
    let hostile: &[(&[u8], &str)] = &[
        (b"[CORE]\n\tHooksPath = /tmp/h\n", "core.hookspath"),
        (
            b"[core]\n\tpager = \"less\" \\\n  ; comment\n",
            "core.pager",
        ),
        (b"[core]\r\n\teditor = vi\r\n", "core.editor"),
        (b"[core \"fsmonitor\0\"]\n\tx = cmd\n", "core.fsmonitor"),
        (b"[core \"FSMONITOR\0junk\"]\n\tx = cmd\n", "core.fsmonitor"),
        (
            b"[core]\n[core]\n[core]\n\tsshCommand = \"ssh -oProxyCommand=x\"\n",
            "core.sshcommand",
        ),
        (
            b"[diff \"t\"]\n\ttextconv = \"sh -c \\\"x\\\"\"\n",
            "diff.t.textconv",
        ),
        (
            b"[filter \"f\"]\n\tsmudge = x\n\tclean = x\n",
            "filter.f.smudge",
        ),
        (b"[alias]\n\tst = !x\n", "alias.st"),
        (
            b"[includeIf \"onbranch:main\"]\n\tpath = ../x\n",
            "includeif.onbranch:main.path",
        ),
        (b"[include]\npath = \"../x\" \\\n", "include.path"),
        (
            b"[credential \"https://h\"]\n\thelper = !x\n",
            "credential.https://h.helper",
        ),
        (
            b"[remote \"o\"]\n\turl = ../o\n\tuploadpack = x\n",
            "remote.o.uploadpack",
        ),
        (
            b"[protocol \"ext\"]\n\tallow = always\n",
            "protocol.ext.allow",
        ),
    ];
    for (text, key) in hostile {
        let after = [pristine.as_slice(), text].concat();
        ws.write("w/.git/config", &after);
        // git itself reads the key.
        let listed = ws.git("w", &["config", "--list", "--null"]);
        assert!(
            listed
                .split('\0')
                .any(|e| e.split('\n').next().unwrap().eq_ignore_ascii_case(key)),
            "git does not see {key}: {listed:?}"
        );
        let f = check_config_change(Some(&pristine), &after, None);
        assert!(keys(&f).iter().any(|k| k == key), "{key}: {f:#?}");
        let i = ws.inspect("w");
        assert!(has(&i, Kind::ConfigKey, key), "{key}: {:#?}", i.findings);
    }
    ws.write(
        "w/.git/config",
        [pristine.as_slice(), b"[core]\n\tpager = x\n[bad\n"].concat(),
    );
    assert!(!ws.run("w", &["status"]).status.success(), "git refuses it");
    let i = ws.inspect("w");
    assert!(has(&i, Kind::Unparsable, "config"), "{:#?}", i.findings);
    assert!(has(&i, Kind::ConfigKey, "core.pager"), "{:#?}", i.findings);
}

#[test]
fn fsmonitor_runs_at_status_and_is_flagged() {
    let ws = Ws::new();
    ws.repo("w");
    let before = ws.read("w/.git/config");
    let (cmd, marker) = ws.marker("fsmonitor");
    ws.git("w", &["config", "core.fsmonitor", &format!("{cmd}; :")]);
    ws.run("w", &["status"]);
    assert!(marker.exists(), "git status ran core.fsmonitor");
    let after = ws.read("w/.git/config");
    let f = check_config_change(Some(&before), &after, None);
    assert_eq!(keys(&f), ["core.fsmonitor"]);
    assert_eq!(f[0].value.as_deref(), Some(format!("{cmd}; :").as_str()));
}

#[test]
fn a_nul_in_a_subsection_runs_and_is_flagged() {
    let ws = Ws::new();
    ws.repo("w");
    let before = ws.read("w/.git/config");
    let (cmd, marker) = ws.marker("nul");
    let after = [
        before.as_slice(),
        format!("[core \"fsmonitor\0\"]\n\tx = {cmd}; :\n").as_bytes(),
    ]
    .concat();
    ws.write("w/.git/config", &after);
    ws.run("w", &["status"]);
    assert!(marker.exists(), "git status ran the key after the NUL");
    let f = check_config_change(Some(&before), &after, None);
    assert_eq!(keys(&f), ["core.fsmonitor"]);
}

#[test]
fn aliases_diff_drivers_filters_and_includes_run_and_are_flagged() {
    let ws = Ws::new();
    ws.repo("w");
    let before = ws.read("w/.git/config");
    let (alias, m_alias) = ws.marker("alias");
    let (textconv, m_textconv) = ws.marker("textconv");
    let (clean, m_clean) = ws.marker("clean");
    let (included, m_included) = ws.marker("include");
    ws.git("w", &["config", "alias.hi", &format!("!{alias}")]);
    ws.git(
        "w",
        &["config", "diff.t.textconv", &format!("{textconv}; cat")],
    );
    ws.git("w", &["config", "filter.f.clean", &format!("{clean}; cat")]);
    ws.write(
        "inc.cfg",
        format!("[core]\n\tfsmonitor = \"{included}; :\"\n"),
    );
    ws.git(
        "w",
        &[
            "config",
            "include.path",
            &ws.path("inc.cfg").display().to_string(),
        ],
    );
    ws.write("w/.gitattributes", "*.t diff=t\n*.f filter=f\n");
    ws.write("w/x.t", "one\n");
    ws.git("w", &["add", "x.t", ".gitattributes"]);
    ws.git("w", &["commit", "-q", "-m", "t"]);
    ws.write("w/x.t", "two\n");
    ws.git("w", &["hi"]);
    ws.git("w", &["diff"]);
    ws.write("w/y.f", "f\n");
    ws.git("w", &["add", "y.f"]);
    for m in [&m_alias, &m_textconv, &m_clean, &m_included] {
        assert!(m.exists(), "{} ran", m.display());
    }
    let f = check_config_change(Some(&before), &ws.read("w/.git/config"), None);
    assert_eq!(
        keys(&f),
        [
            "alias.hi",
            "diff.t.textconv",
            "filter.f.clean",
            "include.path"
        ]
    );
}

#[test]
fn hooks_path_in_a_new_repository_runs_and_is_found() {
    let ws = Ws::new();
    ws.git(".", &["init", "-q", "-b", "main", "sub2"]);
    ws.git("sub2", &["config", "core.hooksPath", "../hk"]);
    let config = ws.read("sub2/.git/config");
    let f = check_config_change(None, &config, None);
    assert_eq!(keys(&f), ["core.hookspath"]);
    assert_eq!(f[0].value.as_deref(), Some("../hk"));
    let i = ws.inspect("sub2");
    assert!(
        has(&i, Kind::ConfigKey, "core.hookspath"),
        "{:#?}",
        i.findings
    );
    // A later run writes the hook as an ordinary workspace file.
    let (cmd, marker) = ws.marker("hookspath");
    ws.executable("hk/post-commit", &cmd);
    ws.git("sub2", &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(marker.exists(), "the human's commit ran the hook");
}

#[test]
fn a_pre_commit_hook_is_found_and_the_samples_are_not() {
    let ws = Ws::new();
    ws.repo("w");
    assert!(ws.path("w/.git/hooks/pre-commit.sample").exists());
    assert!(ws.inspect("w").is_clean());
    let (cmd, marker) = ws.marker("pre-commit");
    ws.executable("w/.git/hooks/pre-commit", &cmd);
    let i = ws.inspect("w");
    assert_eq!(keys(&i.findings), ["hooks/pre-commit"]);
    assert_eq!(i.findings[0].kind, Kind::Hook);
    ws.git("w", &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(marker.exists(), "git commit ran the hook");

    // Not executable yet: found all the same. An unknown executable name:
    // found; a plain file under no hook name: a note.
    ws.write("w/.git/hooks/post-merge", "#!/bin/sh\n");
    ws.executable("w/.git/hooks/helper", "true");
    ws.write("w/.git/hooks/README", "notes\n");
    std::os::unix::fs::symlink("/bin/true", ws.path("w/.git/hooks/post-checkout")).unwrap();
    let i = ws.inspect("w");
    let mut k = keys(&i.findings);
    k.sort();
    assert_eq!(
        k,
        [
            "hooks/helper",
            "hooks/post-checkout",
            "hooks/post-merge",
            "hooks/pre-commit"
        ]
    );
    assert!(has(&i, Kind::Symlink, "hooks/post-checkout"));
    assert!(i.notes.iter().any(|n| n.path.ends_with("hooks/README")));
}

#[test]
fn the_commondir_attack_is_found() {
    // Issue 34: a copy of .git with core.fsmonitor and a pre-commit hook,
    // and .git/commondir pointing to it.
    let ws = Ws::new();
    ws.repo("w");
    let (fsm, m_fsm) = ws.marker("cd-fsmonitor");
    let (hook, m_hook) = ws.marker("cd-hook");
    let cp = Command::new("sh")
        .args(["-c", "cp -a .git cd2 && mv cd2 .git/cd2"])
        .current_dir(ws.path("w"))
        .status()
        .unwrap();
    assert!(cp.success());
    ws.git(
        "w",
        &[
            "config",
            "--file",
            ".git/cd2/config",
            "core.fsmonitor",
            &format!("{fsm}; :"),
        ],
    );
    ws.executable("w/.git/cd2/hooks/pre-commit", &hook);
    ws.write("w/.git/commondir", "cd2\n");
    ws.run("w", &["status"]);
    ws.run("w", &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(
        m_fsm.exists() && m_hook.exists(),
        "the human's status and commit ran both"
    );
    let i = ws.inspect("w");
    assert!(has(&i, Kind::Redirect, "commondir"), "{:#?}", i.findings);
    assert!(
        has(&i, Kind::ConfigKey, "core.fsmonitor"),
        "{:#?}",
        i.findings
    );
    assert!(has(&i, Kind::Hook, "hooks/pre-commit"), "{:#?}", i.findings);
    let f = i
        .findings
        .iter()
        .find(|f| f.kind == Kind::ConfigKey)
        .unwrap();
    assert!(
        f.path.as_ref().unwrap().ends_with(".git/cd2/config"),
        "{f:?}"
    );
}

#[test]
fn planted_dotgit_file_and_directory_are_found() {
    let ws = Ws::new();
    ws.repo("w");
    // A .git file pointing to a git directory the tool made.
    let (cmd, marker) = ws.marker("planted-file");
    ws.git(".", &["init", "-q", "--bare", "evil.git"]);
    ws.git(
        ".",
        &["--git-dir", "evil.git", "config", "core.bare", "false"],
    );
    ws.git(
        ".",
        &[
            "--git-dir",
            "evil.git",
            "config",
            "core.fsmonitor",
            &format!("{cmd}; :"),
        ],
    );
    ws.write(
        "w/src/.git",
        format!("gitdir: {}\n", ws.path("evil.git").display()),
    );
    ws.run("w/src", &["status"]);
    assert!(marker.exists(), "cd src && git status ran it");
    let i = ws.inspect("w/src");
    assert!(
        has(&i, Kind::ConfigKey, "core.fsmonitor"),
        "{:#?}",
        i.findings
    );
    // The .git file itself, as a watcher may hand it over.
    assert_eq!(ws.inspect("w/src/.git").findings, i.findings);
    // With the workspace narrowed to w, the gitdir itself points out of it.
    let narrow = InspectOptions {
        workspace: Some(ws.path("w")),
        ..InspectOptions::default()
    };
    let i = inspect_with(&ws.path("w/src"), &narrow);
    assert!(has(&i, Kind::Redirect, ".git"), "{:#?}", i.findings);

    // A .git directory.
    let (cmd, marker) = ws.marker("planted-dir");
    ws.git("w", &["init", "-q", "lib"]);
    ws.git("w/lib", &["config", "core.fsmonitor", &format!("{cmd}; :")]);
    ws.run("w/lib", &["status"]);
    assert!(marker.exists());
    assert!(has(&ws.inspect("w/lib"), Kind::ConfigKey, "core.fsmonitor"));

    // A .git directory still being built (no HEAD yet) counts.
    ws.write("w/half/.git/config", "[core]\n\tpager = x\n");
    assert!(!looks_like_git_dir(&ws.path("w/half/.git")));
    assert!(has(
        &ws.inspect("w/half/.git"),
        Kind::ConfigKey,
        "core.pager"
    ));
    assert!(has(&ws.inspect("w/half"), Kind::ConfigKey, "core.pager"));

    // A bare repository planted as a plain directory: git's discovery finds
    // it too.
    ws.git("w", &["init", "-q", "--bare", "docs"]);
    ws.git("w", &["--git-dir", "docs", "config", "core.pager", "x"]);
    assert!(looks_like_git_dir(&ws.path("w/docs")));
    assert!(!looks_like_git_dir(&ws.path("w/src")));
    let i = ws.inspect("w/docs");
    assert!(has(&i, Kind::ConfigKey, "core.pager"), "{:#?}", i.findings);

    // A .git link: not followed, itself the finding.
    std::fs::create_dir(ws.path("w/l")).unwrap();
    std::os::unix::fs::symlink(ws.path("evil.git"), ws.path("w/l/.git")).unwrap();
    let i = ws.inspect("w/l");
    assert_eq!(keys(&i.findings), [".git"]);
    assert_eq!(i.findings[0].kind, Kind::Symlink);
}

#[test]
fn config_worktree_is_found() {
    let ws = Ws::new();
    ws.repo("w");
    let (cmd, marker) = ws.marker("config-worktree");
    ws.git("w", &["config", "extensions.worktreeConfig", "true"]);
    ws.git(
        "w",
        &[
            "config",
            "--worktree",
            "core.fsmonitor",
            &format!("{cmd}; :"),
        ],
    );
    ws.run("w", &["status"]);
    assert!(marker.exists(), "git status ran the config.worktree key");
    let i = ws.inspect("w");
    let f = i
        .findings
        .iter()
        .find(|f| f.key == "core.fsmonitor")
        .expect("found");
    assert!(f.path.as_ref().unwrap().ends_with(".git/config.worktree"));
    // Written by hand without the extension: found all the same (enabling
    // it later must not bring it to life unnoticed).
    ws.git("w", &["config", "--unset", "extensions.worktreeConfig"]);
    ws.write("w/.git/config.worktree", "[core]\n\tpager = x\n");
    assert!(has(&ws.inspect("w"), Kind::ConfigKey, "core.pager"));
}

#[test]
fn a_linked_worktree_redirected_is_found() {
    let ws = Ws::new();
    ws.repo("w");
    ws.git("w", &["worktree", "add", "-q", "../wt"]);
    assert!(
        ws.inspect("wt").is_clean(),
        "{:#?}",
        ws.inspect("wt").findings
    );
    let (cmd, marker) = ws.marker("wt-commondir");
    let cp = Command::new("cp")
        .args(["-a", "w/.git", "copy"])
        .current_dir(ws.root())
        .status()
        .unwrap();
    assert!(cp.success());
    ws.git(
        ".",
        &[
            "config",
            "--file",
            "copy/config",
            "core.fsmonitor",
            &format!("{cmd}; :"),
        ],
    );
    ws.write(
        "w/.git/worktrees/wt/commondir",
        format!("{}\n", ws.path("copy").display()),
    );
    ws.run("wt", &["status"]);
    assert!(marker.exists(), "status in the linked worktree ran it");
    for from in ["wt", "w"] {
        let i = ws.inspect(from);
        assert!(
            has(&i, Kind::Redirect, "commondir"),
            "{from}: {:#?}",
            i.findings
        );
        assert!(
            has(&i, Kind::ConfigKey, "core.fsmonitor"),
            "{from}: {:#?}",
            i.findings
        );
    }
    // A worktree without commondir is a git directory of its own.
    std::fs::remove_file(ws.path("w/.git/worktrees/wt/commondir")).unwrap();
    ws.write("w/.git/worktrees/wt/config", "[core]\n\teditor = x\n");
    assert!(has(&ws.inspect("w"), Kind::ConfigKey, "core.editor"));
}

#[test]
fn a_submodule_config_is_inspected() {
    let ws = Ws::new();
    ws.repo("lib");
    ws.repo("w");
    ws.git(
        "w",
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "-q",
            "add",
            "../lib",
            "deep/sub",
        ],
    );
    assert!(
        ws.inspect("w").is_clean(),
        "{:#?}",
        ws.inspect("w").findings
    );
    ws.git("w/deep/sub", &["config", "core.sshCommand", "x"]);
    let i = ws.inspect("w");
    let f = i
        .findings
        .iter()
        .find(|f| f.key == "core.sshcommand")
        .expect("found");
    assert!(
        f.path
            .as_ref()
            .unwrap()
            .ends_with("modules/deep/sub/config"),
        "{f:?}"
    );
    // Its core.worktree out of the workspace is a finding.
    ws.git("w/deep/sub", &["config", "core.worktree", "/"]);
    assert!(has(&ws.inspect("w"), Kind::ConfigKey, "core.worktree"));
    // Without a workspace every core.worktree counts.
    assert!(has(
        &inspect(&ws.path("w")),
        Kind::ConfigKey,
        "core.worktree"
    ));
}

#[test]
fn an_interrupted_rebase_that_runs_a_command_is_found() {
    let ws = Ws::new();
    ws.repo("w");
    ws.git("w", &["commit", "-q", "--allow-empty", "-m", "second"]);
    let (cmd, marker) = ws.marker("rebase");
    let out = Command::new("git")
        .args(["rebase", "-q", "-i", "HEAD~1"])
        .current_dir(ws.path("w"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", ws.root())
        .env(
            "GIT_SEQUENCE_EDITOR",
            format!("printf 'break\\nexec {cmd}\\n' >"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let i = ws.inspect("w");
    let f = i
        .findings
        .iter()
        .find(|f| f.kind == Kind::PendingExec)
        .expect("found");
    assert_eq!(f.value.as_deref(), Some(cmd.as_str()));
    ws.git("w", &["rebase", "--continue"]);
    assert!(marker.exists(), "--continue ran it");
    assert!(ws.inspect("w").is_clean());
}

#[test]
fn links_fifos_and_large_files_are_found_without_following_or_blocking() {
    let ws = Ws::new();
    ws.repo("w");
    ws.write("elsewhere/config", "[core]\n\tpager = x\n");
    std::fs::remove_file(ws.path("w/.git/config")).unwrap();
    std::os::unix::fs::symlink(ws.path("elsewhere/config"), ws.path("w/.git/config")).unwrap();
    let i = ws.inspect("w");
    assert_eq!(keys(&i.findings), ["config"]);
    assert_eq!(i.findings[0].kind, Kind::Symlink);
    assert_eq!(
        i.findings[0].value.as_deref(),
        Some(ws.path("elsewhere/config").to_str().unwrap())
    );

    std::fs::remove_file(ws.path("w/.git/config")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(ws.path("w/.git/config"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let i = ws.inspect("w");
    assert_eq!(i.findings[0].kind, Kind::NotRegular, "{:#?}", i.findings);

    std::fs::remove_file(ws.path("w/.git/config")).unwrap();
    ws.write("w/.git/config", vec![b'#'; 2 << 20]);
    let i = ws.inspect("w");
    assert_eq!(i.findings[0].kind, Kind::TooLarge, "{:#?}", i.findings);
    assert!(i.truncated);

    // Links in place of the directories git descends into.
    std::fs::remove_file(ws.path("w/.git/config")).unwrap();
    ws.git("w", &["init", "-q"]);
    std::fs::remove_dir_all(ws.path("w/.git/hooks")).unwrap();
    std::os::unix::fs::symlink(ws.path("elsewhere"), ws.path("w/.git/hooks")).unwrap();
    std::os::unix::fs::symlink(ws.path("elsewhere"), ws.path("w/.git/worktrees")).unwrap();
    let i = ws.inspect("w");
    let mut k = keys(&i.findings);
    k.sort();
    assert_eq!(k, ["hooks", "worktrees"]);
}

#[test]
fn a_hostile_repository_costs_bounded_time() {
    let ws = Ws::new();
    ws.repo("w");
    for n in 0..3000 {
        std::fs::create_dir_all(ws.path(&format!("w/.git/worktrees/{n}"))).unwrap();
    }
    // Submodule directories nested without end.
    let mut deep = String::from("w/.git/modules");
    for _ in 0..40 {
        deep.push_str("/m");
    }
    std::fs::create_dir_all(ws.path(&deep)).unwrap();
    let start = Instant::now();
    let i = ws.inspect("w");
    let took = start.elapsed();
    assert!(i.truncated);
    assert!(
        i.findings.iter().any(|f| f.kind == Kind::TooMany),
        "{:#?}",
        i.findings
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Tighter limits stop sooner.
    let tight = InspectOptions {
        workspace: Some(ws.root().to_path_buf()),
        limits: Limits {
            max_entries: 10,
            max_git_dirs: 4,
            ..Limits::default()
        },
    };
    let i = inspect_with(&ws.path("w"), &tight);
    assert!(i.truncated && i.git_dirs.len() <= 4, "{:?}", i.git_dirs);
}

#[test]
fn two_inspections_tell_a_rewritten_hook() {
    let ws = Ws::new();
    ws.repo("w");
    ws.executable("w/.git/hooks/pre-push", "echo human's own");
    let before = ws.inspect("w");
    assert_eq!(keys(&before.findings), ["hooks/pre-push"]);
    assert!(ws.inspect("w").new_since(&before).is_empty());
    ws.git("w", &["config", "user.email", "tool@example.com"]);
    assert!(ws.inspect("w").new_since(&before).is_empty());
    ws.executable("w/.git/hooks/pre-push", "echo the tool's");
    let after = ws.inspect("w");
    assert_eq!(
        keys(
            &after
                .new_since(&before)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        ),
        ["hooks/pre-push"]
    );
}

#[test]
fn a_humans_include_into_the_workspace_is_checked() {
    // The human includes a tracked file; the tool edits that file, not .git.
    let ws = Ws::new();
    ws.repo("w");
    ws.write("w/project.gitconfig", "[diff]\n\trenames = copies\n");
    ws.git("w", &["config", "include.path", "../project.gitconfig"]);
    let before = ws.inspect("w");
    assert_eq!(
        keys(&before.findings),
        ["include.path"],
        "the human's own include"
    );
    let (cmd, marker) = ws.marker("include");
    ws.write(
        "w/project.gitconfig",
        format!("[core]\n\tfsmonitor = \"{cmd}; :\"\n"),
    );
    ws.run("w", &["status"]);
    assert!(marker.exists(), "the included key ran");
    let after = ws.inspect("w");
    let new = after.new_since(&before);
    assert_eq!(new.len(), 1, "{new:#?}");
    assert_eq!(new[0].key, "core.fsmonitor");
    assert_eq!(
        new[0].path.as_deref(),
        Some(ws.path("w/project.gitconfig").as_path())
    );
    // A cycle of includes ends.
    ws.write("w/project.gitconfig", "[include]\n\tpath = .git/config\n");
    let i = ws.inspect("w");
    let includes = i.findings.iter().filter(|f| f.key == "include.path");
    assert_eq!(includes.count(), 2, "{:#?}", i.findings);
    // An include naming a FIFO or a device is not opened (no hang, no
    // effect): a note.
    let fifo = Command::new("mkfifo")
        .arg(ws.path("w/fifo"))
        .status()
        .unwrap();
    assert!(fifo.success());
    std::os::unix::fs::symlink("/dev/zero", ws.path("w/zero")).unwrap();
    ws.write(
        "w/project.gitconfig",
        "[include]\n\tpath = fifo\n\tpath = zero\n",
    );
    let i = ws.inspect("w");
    let odd: Vec<_> = i
        .notes
        .iter()
        .filter(|n| n.text.contains("no readable file"))
        .collect();
    assert_eq!(odd.len(), 2, "{:#?}", i.notes);
}

#[test]
fn a_humans_hooks_path_in_the_workspace_is_listed() {
    // A husky-style hooks directory in the work tree holds ordinary files.
    let ws = Ws::new();
    ws.repo("w");
    ws.git("w", &["config", "core.hooksPath", ".husky/_"]);
    ws.executable("w/.husky/_/pre-push", "echo human's own");
    let before = ws.inspect("w");
    let mut k = keys(&before.findings);
    k.sort();
    assert_eq!(k, [".husky/_/pre-push", "core.hookspath"]);
    let (cmd, marker) = ws.marker("husky");
    ws.executable("w/.husky/_/pre-commit", &cmd);
    let new = ws.inspect("w");
    let new = new.new_since(&before);
    assert_eq!(
        keys(&new.into_iter().cloned().collect::<Vec<_>>()),
        [".husky/_/pre-commit"]
    );
    ws.git("w", &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(marker.exists());
}
