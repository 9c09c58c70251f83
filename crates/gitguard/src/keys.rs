//! The configuration keys through which git runs a program, takes
//! configuration or hooks from elsewhere, or moves its work tree; and the
//! notable keys that look alike but are harmless to leave to a tool.
//!
//! [`RULES`] is the one table (`docs/git-guard.md` reproduces it). The first
//! rule whose pattern matches an entry decides; an entry no rule matches is
//! harmless.

use crate::config::{is_boolean, Entry};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// When an entry matching a [`Rule`] is a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Whatever its value.
    Always,
    /// Unless the value is one of these, which git takes to run nothing
    /// (`core.pager = cat`, `core.editor = :`, `core.hooksPath = /dev/null`).
    UnlessOneOf(&'static [&'static str]),
    /// Unless the value is a boolean (the key takes a boolean or a program)
    /// or one of these.
    UnlessBooleanOr(&'static [&'static str]),
    /// When the value starts with `!` (a shell command).
    Bang,
    /// When the path it names lies outside the workspace, resolved against
    /// the git directory ([`Base::GitDir`]) or the work tree above it
    /// ([`Base::WorkTree`]). Without a [`Scope`], always.
    OutsideWorkspace(Base),
    /// Never: listed to say why it is harmless.
    Never,
}

/// What a relative path in an [`When::OutsideWorkspace`] key is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The git directory holding the config (`core.worktree`).
    GitDir,
    /// The directory above the git directory (`submodule.<name>.gitdir`).
    WorkTree,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The key pattern, as git's documentation spells it: `section.key`,
    /// `section.<sub>.key` (any subsection), `section[.<sub>].key` (with or
    /// without one), `section.sub.key` (that subsection), `*` for any
    /// section or key.
    pub pattern: &'static str,
    /// When a matching entry is a finding.
    pub when: When,
    /// Why: what git does with the key.
    pub reason: &'static str,
}

/// Where a config lives, for the keys that name a path
/// ([`When::OutsideWorkspace`]). Paths should be absolute and canonical; they
/// are compared lexically.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The git directory holding the config file (`.git`,
    /// `.git/modules/sub`, `.git/worktrees/wt`).
    pub git_dir: &'a Path,
    /// The workspace the tool may write anyway: a work tree inside it
    /// changes nothing the tool could not change itself.
    pub workspace: &'a Path,
}

const SHELL: &str = "a shell command git runs";

/// Every key through which git runs a program or a shell command, takes
/// configuration or hooks from elsewhere, or reads or writes outside the
/// repository; then the look-alikes kept out, with the reason.
pub static RULES: &[Rule] = &[
    // core
    Rule { pattern: "core.fsmonitor", when: When::UnlessBooleanOr(&[]), reason: "a hook program git runs at every status, diff and add (a boolean selects git's built-in daemon)" },
    Rule { pattern: "core.fsmonitorHookVersion", when: When::Never, reason: "only the protocol version of core.fsmonitor" },
    Rule { pattern: "core.hooksPath", when: When::UnlessOneOf(&["/dev/null"]), reason: "git runs the hooks from this directory instead of the repository's hooks/ (`/dev/null`: none)" },
    Rule { pattern: "core.sshCommand", when: When::Always, reason: "the command git runs instead of ssh for fetch and push" },
    Rule { pattern: "core.gitProxy", when: When::Always, reason: "a proxy command git runs to connect to git:// remotes" },
    Rule { pattern: "core.askPass", when: When::Always, reason: "the program git runs to ask for a password" },
    Rule { pattern: "core.editor", when: When::UnlessOneOf(&[":"]), reason: "the editor git runs for commit messages, rebase todo lists and tags (`:` is none)" },
    Rule { pattern: "core.pager", when: When::UnlessOneOf(&["", "cat"]), reason: "the pager git runs for log, diff, show and others (empty or `cat`: none)" },
    Rule { pattern: "core.alternateRefsCommand", when: When::Always, reason: SHELL },
    Rule { pattern: "core.worktree", when: When::OutsideWorkspace(Base::GitDir), reason: "moves the work tree: checkout, reset and stash write where it points" },
    Rule { pattern: "core.attributesFile", when: When::Never, reason: "attributes only name drivers, and drivers are config keys of this table (the work tree's .gitattributes does the same)" },
    Rule { pattern: "core.excludesFile", when: When::Never, reason: "ignore patterns only" },
    Rule { pattern: "core.sharedRepository", when: When::Never, reason: "file modes of what git creates; runs nothing" },
    Rule { pattern: "core.preloadIndex", when: When::Never, reason: "parallel index stat only" },
    Rule { pattern: "sequence.editor", when: When::UnlessOneOf(&[":"]), reason: "the editor git runs for interactive rebase (`:` is none)" },
    // diff, merge and their drivers
    Rule { pattern: "diff.external", when: When::Always, reason: "the command git runs instead of its own diff" },
    Rule { pattern: "diff.<driver>.command", when: When::Always, reason: "the command a diff driver runs" },
    Rule { pattern: "*[.<driver>].textconv", when: When::Always, reason: "a text conversion command git runs on blobs (diff.<driver>.textconv; any section, to be safe)" },
    Rule { pattern: "diff.tool", when: When::Never, reason: "selects a known tool or a difftool.<tool>.cmd (in this table)" },
    Rule { pattern: "diff.guitool", when: When::Never, reason: "selects a known tool or a difftool.<tool>.cmd (in this table)" },
    Rule { pattern: "difftool.<tool>.cmd", when: When::Always, reason: SHELL },
    Rule { pattern: "difftool.<tool>.path", when: When::Always, reason: "the program git difftool runs for that tool" },
    Rule { pattern: "merge.<driver>.driver", when: When::Always, reason: "the command a merge driver runs" },
    Rule { pattern: "merge.tool", when: When::Never, reason: "selects a known tool or a mergetool.<tool>.cmd (in this table)" },
    Rule { pattern: "merge.guitool", when: When::Never, reason: "selects a known tool or a mergetool.<tool>.cmd (in this table)" },
    Rule { pattern: "mergetool.<tool>.cmd", when: When::Always, reason: SHELL },
    Rule { pattern: "mergetool.<tool>.path", when: When::Always, reason: "the program git mergetool runs for that tool" },
    Rule { pattern: "filter.<driver>.required", when: When::Never, reason: "only whether the filter must succeed" },
    Rule { pattern: "filter.<driver>.*", when: When::Always, reason: "clean, smudge and process are commands git runs on add, checkout and status" },
    Rule { pattern: "interactive.diffFilter", when: When::Always, reason: "a command git add -p pipes the diff through" },
    // credentials, signing
    Rule { pattern: "credential.helper", when: When::UnlessOneOf(&[""]), reason: "a credential helper git runs (a name, a path or a !shell command; empty resets the list)" },
    Rule { pattern: "credential.<url>.helper", when: When::UnlessOneOf(&[""]), reason: "a credential helper git runs (a name, a path or a !shell command; empty resets the list)" },
    Rule { pattern: "gpg.program", when: When::Always, reason: "the program git runs to sign and verify" },
    Rule { pattern: "gpg.<format>.program", when: When::Always, reason: "the program git runs to sign and verify" },
    Rule { pattern: "gpg.ssh.defaultKeyCommand", when: When::Always, reason: "a command git runs to pick the signing key" },
    Rule { pattern: "gpg.ssh.allowedSignersFile", when: When::Never, reason: "which signatures verify as trusted: trust, not execution" },
    Rule { pattern: "gpg.ssh.revocationFile", when: When::Never, reason: "which keys are revoked: trust, not execution" },
    // aliases, pagers, includes, hooks
    Rule { pattern: "alias.*", when: When::Always, reason: "an alias: `!` makes it a shell command, and any other runs git with arguments the tool chose (rebase --exec, grep -O, difftool -x run programs)" },
    Rule { pattern: "alias.<name>.command", when: When::Always, reason: "an alias: `!` makes it a shell command, and any other runs git with arguments the tool chose (rebase --exec, grep -O, difftool -x run programs)" },
    Rule { pattern: "pager.*", when: When::UnlessBooleanOr(&["cat"]), reason: "a pager command git runs for that subcommand (a boolean only turns paging on or off; `cat` is no pager)" },
    Rule { pattern: "include.path", when: When::Always, reason: "git reads configuration from that file" },
    Rule { pattern: "includeIf.<condition>.path", when: When::Always, reason: "git reads configuration from that file" },
    Rule { pattern: "hook.<name>.command", when: When::Always, reason: "a configured hook command (git 2.5x config-based hooks)" },
    Rule { pattern: "hook.<name>.event", when: When::Never, reason: "when a configured hook.<name>.command (in this table) runs" },
    Rule { pattern: "gc.recentObjectsHook", when: When::Always, reason: "a shell command git gc (and auto-gc after commit) runs" },
    Rule { pattern: "trailer.<token>.cmd", when: When::Always, reason: "a shell command git interpret-trailers and commit --trailer run" },
    Rule { pattern: "trailer.<token>.command", when: When::Always, reason: "a shell command git interpret-trailers and commit --trailer run" },
    Rule { pattern: "extensions.worktreeConfig", when: When::Never, reason: "makes git read config.worktree, which the inspection checks like config" },
    Rule { pattern: "receive.procReceiveRefs", when: When::Never, reason: "which pushed refs go to the proc-receive hook, a hook file the inspection checks" },
    // transports
    Rule { pattern: "remote.<name>.uploadpack", when: When::Always, reason: "the program git runs for fetch (locally, for a local or ssh remote)" },
    Rule { pattern: "remote.<name>.receivepack", when: When::Always, reason: "the program git runs for push (locally, for a local or ssh remote)" },
    Rule { pattern: "remote.<name>.url", when: When::Never, reason: "where fetches go; an ext:: URL runs a command only if protocol.ext.allow or protocol.allow (in this table) allow it" },
    Rule { pattern: "remote.<name>.pushurl", when: When::Never, reason: "where pushes go (see remote.<name>.url)" },
    Rule { pattern: "remote.<name>.vcs", when: When::Never, reason: "names a remote helper git-remote-<vcs> found on PATH, not in the repository" },
    Rule { pattern: "remote.<name>.proxy", when: When::Never, reason: "a network proxy URL; runs nothing" },
    Rule { pattern: "url.<base>.insteadOf", when: When::Never, reason: "rewrites URLs, like editing remote.<name>.url; a rewrite to ext:: is blocked by protocol.ext.allow's default" },
    Rule { pattern: "url.<base>.pushInsteadOf", when: When::Never, reason: "rewrites push URLs (see url.<base>.insteadOf)" },
    Rule { pattern: "protocol.allow", when: When::Always, reason: "the default transport policy: `always` lets ext:: URLs run commands" },
    Rule { pattern: "protocol.ext.allow", when: When::Always, reason: "lets ext:: URLs run commands" },
    Rule { pattern: "protocol.<name>.allow", when: When::Never, reason: "other transports run git's own code or a helper on PATH" },
    Rule { pattern: "uploadpack.packObjectsHook", when: When::Always, reason: "a command git upload-pack runs (honoured in global and system config only)" },
    Rule { pattern: "http[.<url>].cookieFile", when: When::Always, reason: "with http.saveCookies git writes this file, wherever it is" },
    Rule { pattern: "http[.<url>].proxy", when: When::Never, reason: "a network proxy URL; runs nothing (TLS still checks the server)" },
    Rule { pattern: "http[.<url>].sslVerify", when: When::Never, reason: "weakens TLS for fetches the tool could redirect anyway; runs nothing" },
    Rule { pattern: "submodule.<name>.update", when: When::Bang, reason: "`!command` is a shell command git submodule update runs" },
    Rule { pattern: "submodule.<name>.gitdir", when: When::OutsideWorkspace(Base::WorkTree), reason: "where the submodule's git directory, its config and hooks, are (extensions.submodulePathConfig)" },
    Rule { pattern: "submodule.<name>.url", when: When::Never, reason: "where the submodule is cloned from (see remote.<name>.url)" },
    // other programs git starts
    Rule { pattern: "browser.<tool>.cmd", when: When::Always, reason: SHELL },
    Rule { pattern: "browser.<tool>.path", when: When::Always, reason: "the browser program git web--browse runs" },
    Rule { pattern: "web.browser", when: When::Never, reason: "selects a known browser or a browser.<tool>.cmd (in this table)" },
    Rule { pattern: "help.browser", when: When::Never, reason: "selects a known browser or a browser.<tool>.cmd (in this table)" },
    Rule { pattern: "instaweb.browser", when: When::Never, reason: "selects a known browser or a browser.<tool>.cmd (in this table)" },
    Rule { pattern: "instaweb.httpd", when: When::Always, reason: "the HTTP daemon command line git instaweb starts" },
    Rule { pattern: "man.<tool>.cmd", when: When::Always, reason: SHELL },
    Rule { pattern: "man.<tool>.path", when: When::Always, reason: "the man viewer program git help runs" },
    Rule { pattern: "man.viewer", when: When::Never, reason: "selects a known viewer or a man.<tool>.cmd (in this table)" },
    Rule { pattern: "guitool.<name>.cmd", when: When::Always, reason: SHELL },
    Rule { pattern: "imap.tunnel", when: When::Always, reason: "a command git imap-send runs to reach the server" },
    Rule { pattern: "sendemail[.<identity>].smtpServer", when: When::Always, reason: "a path here is the sendmail program git send-email runs" },
    Rule { pattern: "sendemail[.<identity>].smtpServerOption", when: When::Always, reason: "options to the sendmail program (its -C names a config that runs programs)" },
    Rule { pattern: "sendemail[.<identity>].sendmailCmd", when: When::Always, reason: SHELL },
    Rule { pattern: "sendemail[.<identity>].toCmd", when: When::Always, reason: SHELL },
    Rule { pattern: "sendemail[.<identity>].ccCmd", when: When::Always, reason: SHELL },
    Rule { pattern: "sendemail[.<identity>].headerCmd", when: When::Always, reason: SHELL },
    Rule { pattern: "tar.<format>.command", when: When::Always, reason: "a shell command git archive pipes through" },
    Rule { pattern: "svn.authorsProg", when: When::Always, reason: "a program git svn runs" },
    Rule { pattern: "lfs.<customtransfer.name>.path", when: When::Always, reason: "a program git-lfs runs (lfs.customtransfer.<name>.path)" },
    Rule { pattern: "lfs.<extension.name>.clean", when: When::Always, reason: "a program git-lfs runs (lfs.extension.<name>.clean)" },
    Rule { pattern: "lfs.<extension.name>.smudge", when: When::Always, reason: "a program git-lfs runs (lfs.extension.<name>.smudge)" },
    // what makes git write or trust outside the repository
    Rule { pattern: "format.outputDirectory", when: When::Always, reason: "git format-patch writes its files (content the tool chose) there" },
    Rule { pattern: "trace2.normalTarget", when: When::Always, reason: "git writes its trace there (global and system config only)" },
    Rule { pattern: "trace2.perfTarget", when: When::Always, reason: "git writes its trace there (global and system config only)" },
    Rule { pattern: "trace2.eventTarget", when: When::Always, reason: "git writes its trace there (global and system config only)" },
    Rule { pattern: "gitcvs[.<method>].logFile", when: When::Always, reason: "git cvsserver writes its log there" },
    Rule { pattern: "gitcvs[.<method>].dbName", when: When::Always, reason: "git cvsserver writes its database there" },
    Rule { pattern: "init.templateDir", when: When::Always, reason: "git init and clone copy hooks from there into new repositories (global config)" },
    Rule { pattern: "safe.directory", when: When::Always, reason: "turns off git's ownership check for repositories (global and system config only)" },
    Rule { pattern: "safe.bareRepository", when: When::Always, reason: "lets git use embedded bare repositories (global and system config only)" },
    Rule { pattern: "maintenance.repo", when: When::Always, reason: "scheduled git maintenance runs unattended in that repository (global config)" },
    Rule { pattern: "commit.template", when: When::Never, reason: "a file read into the message editor; runs nothing" },
];

/// A compiled [`Rule::pattern`].
struct Pattern {
    /// Lowercased; `None` for `*`.
    section: Option<String>,
    sub: Sub,
    /// Lowercased; `None` for `*`.
    key: Option<String>,
}

enum Sub {
    /// No subsection.
    No,
    /// Any subsection, required.
    Any,
    /// With or without any subsection.
    Either,
    /// Exactly this one.
    Exact(String),
}

fn compile(pattern: &str) -> Pattern {
    let first = pattern.find(['.', '[']).unwrap_or(pattern.len());
    let last = pattern.rfind('.').unwrap_or(0);
    let wild = |s: &str| (s != "*").then(|| s.to_ascii_lowercase());
    let section = wild(&pattern[..first]);
    let key = wild(&pattern[last + 1..]);
    let middle = if first < last {
        &pattern[first..last]
    } else {
        ""
    };
    let sub = if middle.starts_with("[.<") {
        Sub::Either
    } else if middle.starts_with(".<") {
        Sub::Any
    } else if let Some(m) = middle.strip_prefix('.') {
        Sub::Exact(m.to_string())
    } else {
        Sub::No
    };
    Pattern { section, sub, key }
}

impl Pattern {
    fn matches(&self, e: &Entry) -> bool {
        let section = self.section.as_deref().is_none_or(|s| s == e.section);
        let key = self.key.as_deref().is_none_or(|k| k == e.key);
        let sub = match (&self.sub, &e.subsection) {
            (Sub::No, None) | (Sub::Either, _) | (Sub::Any, Some(_)) => true,
            (Sub::Exact(want), Some(have)) => want == have,
            _ => false,
        };
        section && sub && key
    }
}

fn compiled() -> &'static [Pattern] {
    static C: OnceLock<Vec<Pattern>> = OnceLock::new();
    C.get_or_init(|| RULES.iter().map(|r| compile(r.pattern)).collect())
}

/// The rule deciding `entry`: the first whose pattern matches.
pub fn rule_for(entry: &Entry) -> Option<&'static Rule> {
    compiled()
        .iter()
        .position(|p| p.matches(entry))
        .map(|i| &RULES[i])
}

/// Why `entry` would make git run something, take configuration or hooks
/// from elsewhere or write outside the repository; `None` if it is harmless.
/// A path key ([`When::OutsideWorkspace`]) counts without a [`Scope`] to say
/// where it points: see [`dangerous_in`].
pub fn dangerous(entry: &Entry) -> Option<&'static str> {
    dangerous_in(entry, None)
}

/// [`dangerous`], with `core.worktree` and `submodule.<name>.gitdir`
/// harmless when they resolve inside `scope`'s workspace.
pub fn dangerous_in(entry: &Entry, scope: Option<&Scope<'_>>) -> Option<&'static str> {
    let rule = rule_for(entry)?;
    let value = entry.raw_value();
    let hit = match rule.when {
        When::Always => true,
        When::Never => false,
        When::UnlessOneOf(harmless) => {
            !value.is_some_and(|v| harmless.iter().any(|h| v == h.as_bytes()))
        }
        When::UnlessBooleanOr(harmless) => {
            !is_boolean(value) && !value.is_some_and(|v| harmless.iter().any(|h| v == h.as_bytes()))
        }
        When::Bang => value.is_some_and(|v| v.starts_with(b"!")),
        When::OutsideWorkspace(base) => match (scope, &entry.value) {
            (Some(scope), Some(v)) => !inside(scope, base, v),
            // A bare key is no path: git refuses it.
            (Some(_), None) => false,
            (None, _) => true,
        },
    };
    hit.then_some(rule.reason)
}

/// Whether the path `value` names, relative to `base` of `scope`, lies in
/// the workspace (lexically: `..` is taken off the path, links are not
/// followed; a `~` path may be expanded by git and never counts as inside).
fn inside(scope: &Scope<'_>, base: Base, value: &str) -> bool {
    if value.is_empty() || value.starts_with('~') {
        return false;
    }
    let base = match base {
        Base::GitDir => scope.git_dir.to_path_buf(),
        Base::WorkTree => scope
            .git_dir
            .parent()
            .map_or_else(|| scope.git_dir.to_path_buf(), Path::to_path_buf),
    };
    let path = normalize(&base.join(value));
    path.starts_with(normalize(scope.workspace))
}

/// `path` with `.` and `..` taken off lexically.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn entry(text: &str) -> Entry {
        Config::parse(text.as_bytes()).unwrap().entries()[0].clone()
    }

    fn hit(text: &str) -> bool {
        dangerous(&entry(text)).is_some()
    }

    #[test]
    fn every_pattern_compiles_to_what_it_says() {
        for r in RULES {
            let p = compile(r.pattern);
            let lower = r.pattern.to_ascii_lowercase();
            if let Some(s) = &p.section {
                assert!(lower.starts_with(s.as_str()), "{}", r.pattern);
            }
            if let Some(k) = &p.key {
                assert!(lower.ends_with(k.as_str()), "{}", r.pattern);
                assert!(
                    k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'),
                    "{}",
                    r.pattern
                );
            }
        }
    }

    #[test]
    fn the_doc_lists_every_rule() {
        let doc = include_str!("../../../docs/git-guard.md");
        for r in RULES {
            let row = format!("| `{}` |", r.pattern);
            assert!(doc.contains(&row), "docs/git-guard.md lacks {}", r.pattern);
            assert!(
                doc.contains(r.reason),
                "docs/git-guard.md: {} has another reason",
                r.pattern
            );
        }
    }

    #[test]
    fn matches() {
        assert!(hit("[core]fsmonitor = touch x"));
        assert!(!hit("[core]fsmonitor = false"));
        assert!(!hit("[core]fsmonitor"));
        assert!(hit("[Core]HooksPath = x"));
        assert!(!hit("[core \"x\"]hooksPath = x"));
        assert!(hit("[diff \"t\"]textconv = cat"));
        assert!(hit("[diff]textconv = cat"));
        assert!(hit("[x \"t\"]textconv = cat"));
        assert!(hit("[diff \"t\"]command = cat"));
        assert!(!hit("[diff]command = cat"));
        assert!(hit("[filter \"lfs\"]clean = git-lfs clean"));
        assert!(hit("[filter \"lfs\"]process = p"));
        assert!(!hit("[filter \"lfs\"]required"));
        assert!(hit("[gpg \"ssh\"]defaultKeyCommand = x"));
        assert!(!hit("[gpg \"x\"]defaultKeyCommand = x"));
        assert!(!hit("[gpg \"ssh\"]allowedSignersFile = x"));
        assert!(hit("[gpg \"ssh\"]program = x"));
        assert!(hit("[alias]st = status"));
        assert!(hit("[alias \"st\"]command = !x"));
        assert!(hit("[pager]log = less -R"));
        assert!(!hit("[pager]log = false"));
        assert!(!hit("[pager]log = cat"));
        assert!(hit("[core]pager = less"));
        assert!(!hit("[core]pager = cat"));
        assert!(!hit("[core]pager = \"\""));
        assert!(hit("[core]pager"));
        assert!(!hit("[core]editor = :"));
        assert!(hit("[core]editor = \": \""));
        assert!(!hit("[core]hooksPath = /dev/null"));
        assert!(hit("[core]hooksPath = /dev/null/"));
        assert!(!hit("[credential]helper = "));
        assert!(hit("[credential]helper = store"));
        assert!(hit("[includeIf \"gitdir:/x\"]path = y"));
        assert!(hit("[include]path = y"));
        assert!(hit("[submodule \"s\"]update = !x"));
        assert!(!hit("[submodule \"s\"]update = rebase"));
        assert!(hit("[protocol \"ext\"]allow = always"));
        assert!(!hit("[protocol \"file\"]allow = always"));
        assert!(hit("[protocol]allow = always"));
        assert!(hit("[sendemail]toCmd = x"));
        assert!(hit("[sendemail \"work\"]smtpServer = /bin/x"));
        assert!(hit("[http]cookieFile = /x"));
        assert!(hit("[http \"https://h/\"]cookieFile = /x"));
        assert!(!hit("[http]proxy = http://p"));
        assert!(hit("[lfs \"customtransfer.x\"]path = p"));
        assert!(hit("[credential \"https://h\"]helper = store"));
        for harmless in [
            "[user]email = a@b",
            "[remote \"o\"]url = ext::sh -c x",
            "[remote \"o\"]fetch = +refs/heads/*:refs/remotes/o/*",
            "[branch \"main\"]remote = o",
            "[core]bare = false",
            "[core]repositoryformatversion = 0",
            "[url \"x\"]insteadOf = y",
            "[extensions]worktreeConfig = true",
        ] {
            assert!(!hit(harmless), "{harmless}");
        }
    }

    #[test]
    fn worktree_paths() {
        let e = entry("[core]worktree = ../../../sub");
        assert!(dangerous(&e).is_some());
        let scope = Scope {
            git_dir: Path::new("/w/.git/modules/sub"),
            workspace: Path::new("/w"),
        };
        assert_eq!(dangerous_in(&e, Some(&scope)), None);
        for out in ["../../../../etc", "/root", "~/x", ""] {
            let e = entry(&format!("[core]worktree = \"{out}\""));
            assert!(dangerous_in(&e, Some(&scope)).is_some(), "{out}");
        }
        let e = entry("[submodule \"s\"]gitdir = .git/modules/s");
        let scope = Scope {
            git_dir: Path::new("/w/.git"),
            workspace: Path::new("/w"),
        };
        assert_eq!(dangerous_in(&e, Some(&scope)), None);
    }
}
