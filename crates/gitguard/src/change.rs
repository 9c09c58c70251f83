//! The change check: what a new version of a config file adds that would
//! make the human's git run something.

use crate::config::{Config, Entry};
use crate::keys::{dangerous_in, Scope};
use crate::{Finding, Kind};
use std::collections::HashSet;

/// The dangerous entries of `after` that `before` does not have with the
/// same canonical name and the same value: added ones and changed ones.
/// `before` is `None` for a new file (a new repository): then every
/// dangerous entry counts.
///
/// An entry the human already had counts nowhere it appears in `after`:
/// moving or repeating one of the human's own entries runs nothing new.
/// Removing one is never a finding: what that re-enables is the human's
/// other configuration (global, system) or the repository's `hooks/`,
/// which [`crate::inspect`] checks. `core.worktree` and
/// `submodule.<name>.gitdir` count here whatever they point to; see
/// [`added_dangerous_in`].
pub fn added_dangerous(before: Option<&Config>, after: &Config) -> Vec<Finding> {
    added_dangerous_in(before, after, None)
}

/// [`added_dangerous`] for a config in `scope`: a `core.worktree` or
/// `submodule.<name>.gitdir` inside the workspace is no finding (git's own
/// `submodule add` writes one).
pub fn added_dangerous_in(
    before: Option<&Config>,
    after: &Config,
    scope: Option<&Scope<'_>>,
) -> Vec<Finding> {
    let had: HashSet<(&[u8], Option<&[u8]>)> = before
        .map(|b| b.entries().iter().map(identity).collect())
        .unwrap_or_default();
    after
        .entries()
        .iter()
        .filter(|e| !had.contains(&identity(e)))
        .filter_map(|e| dangerous_in(e, scope).map(|reason| Finding::entry(e, reason)))
        .collect()
}

fn identity(e: &Entry) -> (&[u8], Option<&[u8]>) {
    (e.raw_name(), e.raw_value())
}

/// The change check on file contents, as a watcher has them: what `after`
/// adds over `before` (`None`: the file is new).
///
/// A file git cannot parse is a [`Kind::Unparsable`] finding: the human's
/// git refuses to run in the repository as it is (so it runs nothing), but
/// whoever fixes the bad line brings back everything after it, and the
/// entries before it are reported too. Restore the previous version. An
/// unparsable `before` counts with the entries before its bad line.
pub fn check_config_change(
    before: Option<&[u8]>,
    after: &[u8],
    scope: Option<&Scope<'_>>,
) -> Vec<Finding> {
    if before == Some(after) {
        return Vec::new();
    }
    let before = before.map(|b| Config::parse(b).unwrap_or_else(|e| e.partial));
    match Config::parse(after) {
        Ok(after) => added_dangerous_in(before.as_ref(), &after, scope),
        Err(e) => {
            let mut out = vec![Finding::unparsable(e.line)];
            out.extend(added_dangerous_in(before.as_ref(), &e.partial, scope));
            out
        }
    }
}

impl Finding {
    pub(crate) fn entry(e: &Entry, reason: &'static str) -> Finding {
        Finding {
            kind: Kind::ConfigKey,
            path: None,
            key: e.name().into_owned(),
            value: e.value.clone(),
            line: Some(e.line),
            reason: reason.into(),
            stamp: None,
        }
    }

    pub(crate) fn unparsable(line: usize) -> Finding {
        Finding {
            kind: Kind::Unparsable,
            path: None,
            key: String::new(),
            value: None,
            line: Some(line),
            reason: format!(
                "git cannot parse this config (bad config line {line}): git refuses to run \
                 until it is fixed, and a fix brings back what follows; restore the previous version"
            )
            .into(),
            stamp: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(f: &[Finding]) -> Vec<String> {
        f.iter()
            .map(|f| format!("{}={}", f.key, f.value.as_deref().unwrap_or("<none>")))
            .collect()
    }

    const HUMAN: &[u8] =
        b"[core]\n\trepositoryformatversion = 0\n\tpager = less -R\n[alias]\n\tst = status\n";

    #[test]
    fn everyday_changes_pass() {
        let after = [
            HUMAN,
            b"[user]\n\temail = a@b\n[remote \"origin\"]\n\turl = ../o\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            b"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
        ]
        .concat();
        assert!(check_config_change(Some(HUMAN), &after, None).is_empty());
        // Reordered, repeated, removed human entries.
        let reordered = b"[alias]\n\tst = status\n[core]\n\tpager = less -R\n\tpager = less -R\n";
        assert!(check_config_change(Some(HUMAN), reordered, None).is_empty());
        assert!(check_config_change(Some(HUMAN), b"", None).is_empty());
    }

    #[test]
    fn added_and_changed_dangerous_keys() {
        let after = [
            HUMAN,
            b"[core]\n\tpager = evil\n\tfsmonitor = x\n[alias]\n\tst = !x\n",
        ]
        .concat();
        let f = check_config_change(Some(HUMAN), &after, None);
        assert_eq!(
            keys(&f),
            ["core.pager=evil", "core.fsmonitor=x", "alias.st=!x"]
        );
        assert!(f.iter().all(|f| f.kind == Kind::ConfigKey));
        assert_eq!(f[0].line, Some(7));
        // A new repository: every dangerous entry.
        let f = check_config_change(None, HUMAN, None);
        assert_eq!(keys(&f), ["core.pager=less -R", "alias.st=status"]);
    }

    #[test]
    fn unparsable() {
        let after = [
            HUMAN,
            b"[core]\n\thooksPath = /tmp/h\n[bad\n\tfsmonitor = x\n",
        ]
        .concat();
        let f = check_config_change(Some(HUMAN), &after, None);
        assert_eq!(f[0].kind, Kind::Unparsable);
        assert_eq!(f[0].line, Some(8));
        assert_eq!(keys(&f[1..]), ["core.hookspath=/tmp/h"]);
        // An unchanged file is no change, parsable or not.
        assert!(check_config_change(Some(&after), &after, None).is_empty());
    }
}
