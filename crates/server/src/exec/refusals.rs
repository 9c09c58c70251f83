//! What a shell says when the sandbox refuses a protected path, said plainly:
//! a tool's `touch: cannot touch '/home/u/.bashrc': Read-only file system`
//! does not tell that toolsrv protects that file, nor how to grant it. After
//! a confined run, its output is searched for the messages of `EROFS`,
//! `EBUSY`, `EACCES` and `EPERM` (coreutils, sh, bash, Python, git word them
//! alike: `<path>: <strerror>` or `'<path>': <strerror>`), and for each path
//! named there that is protected, one line is added at the end of the result:
//! `[toolsrv: /home/u/.bashrc: read-only to tools, a path the sandbox
//! protects …]`.

use std::path::{Component, Path, PathBuf};

/// The messages searched for.
const REFUSALS: &[&str] = &[
    "Read-only file system",
    "Device or resource busy",
    "Permission denied",
    "Operation not permitted",
];

/// At most this much of a run's output is searched (a larger output is not).
pub(crate) const SEARCHED: usize = 1 << 20;

/// At most this many lines are added.
const MAX_NOTES: usize = 5;

/// What protects a path: the protected path (it, or one it lies in) and
/// whether it is hidden (else read-only).
pub(crate) type Protection = (PathBuf, bool);

/// The `[toolsrv: …]` lines for `output` of a run in `cwd`, `protected`
/// telling what protects a path.
pub(crate) fn notes(
    output: &[u8],
    cwd: &Path,
    protected: impl Fn(&Path) -> Option<Protection>,
) -> Vec<String> {
    if output.len() > SEARCHED || !REFUSALS.iter().any(|r| contains(output, r.as_bytes())) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(output);
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if !REFUSALS.iter().any(|r| line.contains(r)) {
            continue;
        }
        for cand in candidates(line) {
            let abs = lexical(&cwd.join(cand));
            let Some((root, hidden)) = protected(&abs) else {
                continue;
            };
            let what = if hidden {
                "hidden from"
            } else {
                "read-only to"
            };
            let about = if root == abs {
                format!("{what} tools")
            } else {
                format!("it lies in {}, which is {what} tools", root.display())
            };
            let note = format!(
                "[toolsrv: {}: {about}, a path the sandbox protects whatever the rules grant; name it in a rule of the policy to hand it to tools (docs/policy-format.md, \"Protected paths\")]",
                abs.display()
            );
            if !out.contains(&note) {
                out.push(note);
            }
            if out.len() == MAX_NOTES {
                return out;
            }
        }
    }
    out
}

/// The paths a refusal line names: quoted ones (`'…'`, `"…"`, `` `…' ``) and
/// the `:`-separated field right before the message (`sh: 1: cannot create
/// /x: Read-only file system`, `bash: /x: Permission denied`).
fn candidates(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('`', '\'')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            let quoted = &after[..j];
            if looks_like_path(quoted) {
                out.push(quoted);
            }
            rest = &after[j + close.len_utf8()..];
        }
    }
    for r in REFUSALS {
        let Some(i) = line.find(&format!(": {r}")) else {
            continue;
        };
        let before = &line[..i];
        let field = before.rsplit(": ").next().unwrap_or(before);
        // `cannot create /x`, `could not lock config file .git/config`.
        let word = field.rsplit(' ').next().unwrap_or(field);
        let word = word.trim_matches(|c| matches!(c, '\'' | '"' | '`'));
        if looks_like_path(word) && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && (s.contains('/') || s.starts_with('.')) && !s.contains('\n') && s.len() < 4096
}

/// `p` with `.` and `..` taken out, without looking at the filesystem.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected(p: &Path) -> Option<Protection> {
        for (root, hidden) in [
            ("/h/.bashrc", false),
            ("/w/.git/hooks", false),
            ("/h/.ssh", true),
        ] {
            if p.starts_with(root) {
                return Some((PathBuf::from(root), hidden));
            }
        }
        None
    }

    #[test]
    fn the_shells_messages_name_the_protected_paths() {
        let out = b"touch: cannot touch '/h/.bashrc': Read-only file system\n\
            sh: 1: cannot create /h/.bashrc: Read-only file system\n\
            rm: cannot remove '.git/hooks/pre-commit': Device or resource busy\n\
            cat: /h/.ssh/id_rsa: Permission denied\n\
            touch: cannot touch '/etc/x': Read-only file system\n\
            ok\n";
        let got = notes(out, Path::new("/w"), protected);
        assert_eq!(got.len(), 3, "{got:#?}");
        let notes_of = notes;
        let notes = got;
        assert!(
            notes[0].starts_with(
                "[toolsrv: /h/.bashrc: read-only to tools, a path the sandbox protects"
            ),
            "{}",
            notes[0]
        );
        assert!(notes[1].starts_with("[toolsrv: /w/.git/hooks/pre-commit: it lies in /w/.git/hooks, which is read-only to tools"), "{}", notes[1]);
        assert!(
            notes[2].starts_with(
                "[toolsrv: /h/.ssh/id_rsa: it lies in /h/.ssh, which is hidden from tools"
            ),
            "{}",
            notes[2]
        );
        assert!(notes_of(b"all fine\n", Path::new("/w"), protected).is_empty());
        assert!(notes_of(
            b"x: ./a/../../.bashrc: Permission denied\n",
            Path::new("/h/sub"),
            protected
        )
        .first()
        .is_some_and(|n| n.starts_with("[toolsrv: /h/.bashrc:")));
    }

    #[test]
    fn python_and_git_messages_too() {
        let out = b"PermissionError: [Errno 13] Permission denied: '/h/.ssh/config'\n\
            error: could not lock config file /h/.bashrc: Read-only file system\n";
        let n = notes(out, Path::new("/w"), protected);
        assert_eq!(n.len(), 2, "{n:#?}");
    }
}
