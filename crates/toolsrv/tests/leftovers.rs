//! What a sandboxed tool leaves behind (issue 34): nothing it makes may run
//! later for the human, and protecting a path leaves nothing in the user's
//! directories. Each test is the attack, over the socket, against the real
//! binary and kernel; then the human's own (unconfined) `git` runs in the
//! workspace, and a marker outside it tells whether anything the tool wrote
//! ran. On the code before the guard (8877a1f) every marker appeared, or
//! the tool's everyday `git config` failed with `Device or resource busy`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::procs_util::bg;
use crate::sandbox_view::{q, tmp, Session};
use crate::util::{wait_until, Launch, WAIT};

/// The human's `git` in `dir`: unconfined, with no global or system
/// configuration of this machine.
fn human_git(dir: &Path, args: &[&str]) -> std::process::Output {
    let (_h, home) = tmp();
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git")
}

/// The human adds a new file `name` in the repository at `dir` and commits
/// it (as an identity of its own); the commit must succeed.
#[track_caller]
fn human_commit(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), "new\n").expect("file");
    assert!(human_git(dir, &["add", name]).status.success());
    let o = human_git(
        dir,
        &[
            "-c",
            "user.email=h@example.com",
            "-c",
            "user.name=h",
            "commit",
            "-q",
            "-m",
            name,
        ],
    );
    assert!(o.status.success(), "{o:?}");
}

/// A repository at `dir` with one commit, made by the human.
fn human_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("repo dir");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.email", "h@example.com"],
        &["config", "user.name", "human"],
    ] {
        assert!(human_git(dir, args).status.success(), "git {args:?}");
    }
    std::fs::write(dir.join("README"), "readme\n").expect("README");
    for args in [&["add", "README"][..], &["commit", "-q", "-m", "first"]] {
        let o = human_git(dir, args);
        assert!(o.status.success(), "git {args:?}: {o:?}");
    }
}

/// The quarantine of the server at `socket`: each record's original path.
fn quarantined(socket: &Path) -> Vec<PathBuf> {
    let mut dir = socket.as_os_str().to_owned();
    dir.push(".state/quarantine");
    let mut out = Vec::new();
    for e in std::fs::read_dir(PathBuf::from(dir)).into_iter().flatten() {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                if let Some(o) = v["original"].as_str() {
                    out.push(PathBuf::from(o));
                }
            }
        }
    }
    out
}

/// A marker directory outside the workspace, and a command that marks it.
struct Marker {
    _d: tempfile::TempDir,
    file: PathBuf,
}

impl Marker {
    fn new() -> Marker {
        let (d, p) = tmp();
        Marker {
            _d: d,
            file: p.join("RAN-OUTSIDE-THE-SANDBOX"),
        }
    }
    /// A shell command that leaves the marker.
    fn cmd(&self) -> String {
        format!("echo ran >> {}", q(&self.file))
    }
    #[track_caller]
    fn assert_absent(&self, what: &str) {
        assert!(
            !self.file.exists(),
            "{what}: the human's git ran what the tool wrote"
        );
    }
}

/// Attack (issue 34, critical): a tool copies `.git` into `.git/cd2`, puts
/// `core.fsmonitor` and a `pre-commit` hook in the copy and points
/// `.git/commondir` at it; then writes a `config.worktree` with
/// `core.fsmonitor`. On 8877a1f the human's next `git status` and `git
/// commit` ran both, as root.
///
/// Expected: `commondir` and `config.worktree` are gone when the run is
/// reported ended (in quarantine, named in the result); the human's git
/// runs nothing.
#[test]
fn commondir_and_config_worktree_redirect_nothing() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    let script = format!(
        "mkdir .git/cd2; cp -a .git/HEAD .git/config .git/objects .git/refs .git/hooks .git/cd2/; \
         printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {mark} >> .git/cd2/config; \
         printf '#!/bin/sh\\n%s\\n' {mark} > .git/cd2/hooks/pre-commit; chmod +x .git/cd2/hooks/pre-commit; \
         echo cd2 > .git/commondir; \
         printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {mark} > .git/config.worktree; echo done",
        mark = q(Path::new(&m.cmd()))
    );
    let (_, text) = s.sh(&script);
    assert!(text.contains("done"), "{text}");
    assert!(!cwd.join(".git/commondir").exists(), "{text}");
    assert!(!cwd.join(".git/config.worktree").exists(), "{text}");
    assert!(text.contains("[toolsrv: .git/commondir"), "{text}");
    let q = quarantined(&s.srv.socket);
    assert!(q.contains(&cwd.join(".git/commondir")), "{q:?}");
    assert!(human_git(&cwd, &["status"]).status.success());
    std::fs::write(cwd.join("b.txt"), "b\n").expect("b");
    human_git(&cwd, &["add", "b.txt"]);
    let o = human_git(&cwd, &["commit", "-q", "-m", "second"]);
    assert!(o.status.success(), "{o:?}");
    m.assert_absent("git status / git commit after commondir and config.worktree");
}

/// Attack (issue 34, critical): a planted `src/.git`, as a `gitdir:` file
/// pointing at a repository the tool made outside the workspace and as a
/// directory whose config sets `core.fsmonitor`: git takes the nearest
/// `.git` upward, so the human's `cd src && git status` ran the tool's
/// command. A tool's `git clone` of a local repository must stay usable.
#[test]
fn a_planted_git_below_the_workspace_runs_nothing() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    let origin = cwd.join("origin");
    human_repo(&origin);
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    let mark = q(Path::new(&m.cmd()));
    // The directory form.
    let (_, text) = s.sh(&format!(
        "mkdir -p src && git init -q src/.x && mv src/.x/.git src/.git && rmdir src/.x && \
         printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {mark} >> src/.git/config; echo planted"
    ));
    assert!(text.contains("planted"), "{text}");
    let cfg = std::fs::read_to_string(cwd.join("src/.git/config")).unwrap_or_default();
    assert!(!cfg.contains("fsmonitor"), "{cfg}\n{text}");
    human_git(&cwd.join("src"), &["status"]);
    m.assert_absent("cd src && git status (a planted .git directory)");
    // The file form, pointing outside the workspace (the tool's private
    // temporary directory).
    std::fs::create_dir_all(cwd.join("lib")).expect("lib");
    let (_, text) = s.sh(&format!(
        "e=${{TMPDIR:-/tmp}}; git init -q $e/r && printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {mark} >> $e/r/.git/config; \
         echo \"gitdir: $e/r/.git\" > lib/.git; echo planted"
    ));
    assert!(text.contains("planted"), "{text}");
    assert!(!cwd.join("lib/.git").exists(), "{text}");
    human_git(&cwd.join("lib"), &["status"]);
    m.assert_absent("cd lib && git status (a planted .git file)");
    // A local clone stays a working repository.
    s.ok("git clone -q origin cloned");
    let o = human_git(&cwd.join("cloned"), &["log", "--oneline"]);
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("first"),
        "{o:?}"
    );
}

/// Blocker (issue 34): a tool's `git init` plus `core.hooksPath` pointing at
/// an ordinary workspace directory, and a hook written into the new
/// repository in the same run: on 8877a1f the human's `git commit` there
/// printed `HOOK RAN OUTSIDE THE SANDBOX`.
#[test]
fn a_repository_a_tool_creates_runs_nothing_at_the_humans_commit() {
    let (_c, cwd) = tmp();
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    let hook = format!("#!/bin/sh\\n{}\\n", m.cmd().replace('\'', "'\\''"));
    let (_, text) = s.sh(&format!(
        "git init -q sub2 && git -C sub2 config core.hooksPath ../hk; \
         mkdir -p hk && printf '{hook}' > hk/post-commit && chmod +x hk/post-commit; \
         printf '{hook}' > sub2/.git/hooks/post-commit; chmod +x sub2/.git/hooks/post-commit; echo made"
    ));
    assert!(text.contains("made"), "{text}");
    assert!(
        text.contains("core.hookspath") || text.contains("core.hooksPath"),
        "the result names the refused key: {text}"
    );
    let o = human_git(&cwd.join("sub2"), &["config", "--get", "core.hooksPath"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(!cwd.join("sub2/.git/hooks/post-commit").exists(), "{text}");
    // A later run cannot set it either.
    let (_, text) = s.sh("git -C sub2 config core.hooksPath ../hk; echo again");
    assert!(text.contains("again"), "{text}");
    human_commit(&cwd.join("sub2"), "f");
    m.assert_absent("git commit in a repository a tool made");
}

/// Major (issue 34): git's own config writes (`config.lock`, renamed over
/// `config`) failed with `Device or resource busy` where `config` was a
/// mount point in the view. They succeed, and what they wrote stays.
#[test]
fn a_tools_everyday_git_config_writes_succeed() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    s.ok("git remote add origin https://example.com/r.git && \
          git config user.email tool@example.com && \
          git fetch -q . main:refs/remotes/origin/main && git branch -u origin/main && \
          git init -q && echo ok");
    let cfg = std::fs::read_to_string(cwd.join(".git/config")).expect("config");
    for want in [
        "url = https://example.com/r.git",
        "email = tool@example.com",
        "merge = refs/heads/main",
    ] {
        assert!(cfg.contains(want), "{want}: {cfg}");
    }
}

/// High (issue 34): a background tool that started before the human's `git
/// config user.name x` (which replaces `.git/config` by rename) appends
/// `core.fsmonitor` to the new file. The key does not stay, the human's
/// change does, and the human's `git status` runs nothing.
#[test]
fn a_running_tool_cannot_add_a_key_to_a_config_the_human_replaced() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    let script = format!(
        "while [ ! -e go ]; do sleep 0.01; done; \
         printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {} >> .git/config; echo appended > result",
        q(Path::new(&m.cmd()))
    );
    bg(
        &mut s.c,
        &[("tool", "shell"), ("agent", "a1"), ("command", &script)],
    )
    .expect("bg");
    assert!(human_git(&cwd, &["config", "user.name", "x"])
        .status
        .success());
    std::fs::write(cwd.join("go"), "").expect("go");
    assert!(
        wait_until(WAIT, || cwd.join("result").exists()),
        "the tool did not run"
    );
    let clean =
        || std::fs::read_to_string(cwd.join(".git/config")).is_ok_and(|c| !c.contains("fsmonitor"));
    assert!(wait_until(WAIT, clean), "core.fsmonitor stayed");
    let cfg = std::fs::read_to_string(cwd.join(".git/config")).expect("config");
    assert!(
        cfg.contains("name = x"),
        "the human's change was lost: {cfg}"
    );
    human_git(&cwd, &["status"]);
    m.assert_absent("git status after a running tool appended core.fsmonitor");
}

/// Issue 34 item 1: agent configuration a tool creates (`.mcp.json`,
/// `.vscode/tasks.json`, `.claude/settings.json`) and a credential store in
/// a writable `$HOME` (`~/.aws/credentials`) do not survive the run: they
/// are in quarantine, named in the result and the log. The same files
/// created by the human while a run is under way stay where they are.
#[test]
fn what_a_tool_creates_in_a_protected_place_goes_to_quarantine_and_the_humans_stays() {
    let (_h, home) = tmp();
    let hs = home.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&home).env("HOME", &hs));
    let made = [
        ".mcp.json",
        ".vscode/tasks.json",
        ".claude/settings.json",
        ".aws/credentials",
    ];
    let (_, text) = s.sh(
        "echo '{\"mcpServers\":{}}' > .mcp.json; mkdir -p .vscode .claude .aws; \
         echo '{}' > .vscode/tasks.json; echo '{}' > .claude/settings.json; \
         echo key > .aws/credentials; echo done",
    );
    assert!(text.contains("done"), "{text}");
    for f in made {
        assert!(!home.join(f).exists(), "{f} stayed: {text}");
    }
    assert!(text.contains("[toolsrv: .mcp.json"), "{text}");
    let qd = quarantined(&s.srv.socket);
    for f in [".mcp.json", ".vscode", ".claude", ".aws"] {
        assert!(qd.contains(&home.join(f)), "{f} not in quarantine: {qd:?}");
    }
    let log = s.srv.log_text();
    assert!(log.contains("moved what a tool made to quarantine") && log.contains(".mcp.json"));
    // The human makes the same while a tool runs.
    let pid = bg(
        &mut s.c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", "while [ ! -e go ]; do sleep 0.01; done"),
        ],
    )
    .expect("bg");
    for f in made {
        let p = home.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(&p, "human\n").expect("human's file");
    }
    std::fs::write(home.join("go"), "").expect("go");
    let _ = pid;
    s.ok("true");
    for f in made {
        assert_eq!(
            std::fs::read_to_string(home.join(f)).unwrap_or_default(),
            "human\n",
            "{f}: the human's file was moved"
        );
    }
}

/// Issue 34 item 1: protection leaves no trace. After a server start and
/// two runs, a workspace and a `$HOME` (here the same directory, the
/// harder case) hold nothing that no one asked for.
#[test]
fn a_server_start_and_two_runs_leave_nothing_new() {
    let (_h, home) = tmp();
    std::fs::write(home.join("notes.txt"), "n\n").expect("notes");
    human_repo(&home.join("proj"));
    // The server's own cache (`$XDG_CACHE_HOME/toolsrv`: the built-in
    // tools unpacked, the copy-on-write layers) is where a server keeps
    // its files; it is not a placeholder.
    let own = home.join(".cache");
    let listing = |p: &Path| {
        let mut v: Vec<String> = walk(p)
            .into_iter()
            .filter(|e| !Path::new(e).starts_with(&own))
            .collect();
        v.sort();
        v
    };
    let before = listing(&home);
    let hs = home.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&home).env("HOME", &hs));
    s.ok("ls -a >/dev/null");
    s.ok("cd proj && git status >/dev/null");
    assert_eq!(listing(&home), before);
}

fn walk(p: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        out.push(path.display().to_string());
        if e.file_type().is_ok_and(|t| t.is_dir()) && !path.ends_with(".git/objects") {
            out.extend(walk(&path));
        }
    }
    out
}

/// High (issue 34): the human's `core.hooksPath` names a directory of the
/// work tree (husky's `.husky/_`), an ordinary workspace directory a tool
/// may write; and the human's config includes a file of the workspace.
/// A hook a tool writes there, or a key it adds to the included file, must
/// not run at the human's next commit.
#[test]
fn the_humans_hooks_path_and_included_config_in_the_workspace_run_nothing_a_tool_wrote() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    std::fs::create_dir_all(cwd.join(".husky/_")).expect("husky");
    std::fs::write(cwd.join("team.gitconfig"), "[user]\n\tname = team\n").expect("include");
    for args in [
        &["config", "core.hooksPath", ".husky/_"][..],
        &["config", "include.path", "../team.gitconfig"],
    ] {
        assert!(human_git(&cwd, args).status.success());
    }
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    s.ok("true");
    let hook = format!("#!/bin/sh\\n{}\\n", m.cmd().replace('\'', "'\\''"));
    let (_, text) = s.sh(&format!(
        "printf '{hook}' > .husky/_/pre-commit; chmod +x .husky/_/pre-commit; \
         printf '[core]\\n\\tfsmonitor = \"%s\"\\n' {} >> team.gitconfig; echo done",
        q(Path::new(&m.cmd()))
    ));
    assert!(text.contains("done"), "{text}");
    assert!(!cwd.join(".husky/_/pre-commit").exists(), "{text}");
    let inc = std::fs::read_to_string(cwd.join("team.gitconfig")).expect("include");
    assert!(
        !inc.contains("fsmonitor") && inc.contains("name = team"),
        "{inc}\n{text}"
    );
    std::fs::write(cwd.join("c.txt"), "c\n").expect("c");
    human_git(&cwd, &["add", "c.txt"]);
    let o = human_git(&cwd, &["commit", "-q", "-m", "third"]);
    assert!(o.status.success(), "{o:?}");
    m.assert_absent("git commit with the human's hooksPath and include in the workspace");
}

/// High (issue 34): with `--cwd $HOME`, what the human's programs execute
/// or read their configuration from, written by a tool where it did not
/// exist yet: `~/.gitconfig` (`core.pager`), `~/.bash_aliases`, a user
/// service, an autostart entry, `~/.local/bin/git`, `~/.cargo/config.toml`
/// (`rustc-wrapper`), `~/.vimrc`, `~/bin/git`. On 8877a1f each stayed.
/// Expected: each is in quarantine when the run is reported ended; an
/// ordinary file and directory the tool makes stay.
#[test]
fn a_writable_home_keeps_nothing_a_tool_adds_for_the_humans_programs() {
    let (_h, home) = tmp();
    std::fs::write(home.join("notes.txt"), "n\n").expect("notes");
    let hs = home.display().to_string();
    let mut s = Session::no_auth(Launch::new().cwd(&home).env("HOME", &hs));
    let (_, text) = s.sh(
        "printf '[core]\\n\\tpager = evil\\n' > .gitconfig; echo 'alias ls=evil' > .bash_aliases; \
         mkdir -p .config/systemd/user && echo x > .config/systemd/user/x.service; \
         mkdir -p .config/autostart; echo x > .config/autostart/x.desktop; \
         mkdir -p .local/bin && echo evil > .local/bin/git; \
         mkdir -p .cargo && echo 'build.rustc-wrapper = \"evil\"' > .cargo/config.toml; \
         echo '!evil' > .vimrc; mkdir -p bin && echo evil > bin/git; \
         echo mine > mine.txt && mkdir -p work && echo w > work/w.txt; echo done",
    );
    assert!(text.contains("done"), "{text}");
    for p in [
        ".gitconfig",
        ".bash_aliases",
        ".config",
        ".local",
        ".cargo",
        ".vimrc",
        "bin",
    ] {
        assert!(!home.join(p).exists(), "{p} stayed: {text}");
    }
    assert!(home.join("mine.txt").exists() && home.join("work/w.txt").exists());
    let q = quarantined(&s.srv.socket);
    for p in [".gitconfig", ".config", "bin"] {
        assert!(q.contains(&home.join(p)), "{p} not in quarantine: {q:?}");
    }
}

/// Found by the `guard` bench: a tool that makes `.mcp.json` over and over
/// (each time waiting until it is gone) raced the view's rescan, which
/// protected one in place before the guard moved it and then dropped the
/// path from what the guard watched for (it existed): the next one stayed.
/// Expected: every one of 1,000 is gone within 5 s (each is, in well under
/// a millisecond as a rule), across several rescans.
#[test]
fn a_tool_that_keeps_making_a_protected_path_never_keeps_one() {
    let (_c, cwd) = tmp();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    // In the background: 1,000 rounds take a few seconds, more under load.
    let script = r#"python3 - > result.txt <<'PY'
import os, time, sys
for i in range(1000):
    open(".mcp.json", "w").close()
    t0 = time.monotonic()
    while os.path.lexists(".mcp.json"):
        if time.monotonic() - t0 > 5:
            print("stuck at", i); sys.exit(1)
print("all gone")
PY"#;
    bg(
        &mut s.c,
        &[("tool", "shell"), ("agent", "a1"), ("command", script)],
    )
    .expect("bg");
    let done = || std::fs::read_to_string(cwd.join("result.txt")).is_ok_and(|t| t.ends_with('\n'));
    assert!(
        wait_until(std::time::Duration::from_secs(120), done),
        "the loop did not end"
    );
    let text = std::fs::read_to_string(cwd.join("result.txt")).expect("result");
    assert_eq!(text, "all gone\n");
    assert!(!cwd.join(".mcp.json").exists());
}

/// A tool's new repository whose `hooks` is a symbolic link to a workspace
/// directory holding a `post-commit`: git follows the link. Expected: the
/// link is in quarantine and the human's commit there runs nothing.
#[test]
fn a_hooks_link_in_a_tools_repository_runs_nothing() {
    let (_c, cwd) = tmp();
    let m = Marker::new();
    let mut s = Session::no_auth(Launch::new().cwd(&cwd));
    let hook = format!("#!/bin/sh\\n{}\\n", m.cmd().replace('\'', "'\\''"));
    let (_, text) = s.sh(&format!(
        "git init -q r && rm -rf r/.git/hooks; mkdir -p hk && printf '{hook}' > hk/post-commit && chmod +x hk/post-commit; \
         ln -s ../../hk r/.git/hooks; echo made"
    ));
    assert!(text.contains("made"), "{text}");
    assert!(
        std::fs::symlink_metadata(cwd.join("r/.git/hooks")).is_err(),
        "{text}"
    );
    human_commit(&cwd.join("r"), "f");
    m.assert_absent("git commit in a repository whose hooks is a link");
}

/// Without exact attribution (`TOOLSRV_TOOLS_PIDNS=off`, as a non-root
/// server has it): a change in a watched place is a tool's while a confined
/// run is under way, the human's otherwise. A tool's `.mcp.json` and
/// `commondir` still go to quarantine before the run is reported ended; the
/// human's `.mcp.json`, made while no run is under way, stays.
#[test]
fn without_exact_attribution_a_tools_leftovers_still_go_and_the_humans_stay() {
    let (_c, cwd) = tmp();
    human_repo(&cwd);
    let mut s = Session::no_auth(Launch::new().cwd(&cwd).env("TOOLSRV_TOOLS_PIDNS", "off"));
    s.ok("true");
    let (_, text) = s.sh("echo '{}' > .mcp.json; echo x > .git/commondir; echo done");
    assert!(text.contains("done"), "{text}");
    assert!(!cwd.join(".mcp.json").exists(), "{text}");
    assert!(!cwd.join(".git/commondir").exists(), "{text}");
    std::fs::write(cwd.join(".mcp.json"), "{\"human\":1}\n").expect("human's");
    s.ok("true");
    assert_eq!(
        std::fs::read_to_string(cwd.join(".mcp.json")).expect("stays"),
        "{\"human\":1}\n"
    );
}
