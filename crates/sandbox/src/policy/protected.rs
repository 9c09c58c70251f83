//! Paths that a rule on a whole directory never grants.
//!
//! Landlock only allows: a rule on `/etc` covers `/etc/shadow`, and a server
//! running as root would let its tools read it. So the resolver *carves* these
//! paths out of every rule whose directory contains them: the directory keeps
//! a list-only rule, and each of its entries except the protected one gets the
//! directory's rule, recursively down to the protected path. A rule that names
//! a protected path itself (or something inside it) is kept: listing the path
//! is how a policy hands it to tools on purpose.
//!
//! Four kinds of paths are carved (docs/containment.md):
//! - [`PROTECTED`]: system credential files, when toolsrv itself can read them;
//! - [`CREDENTIAL_STORES`]: the user's credential stores under `$HOME`;
//! - [`TOOLSRV_STATE`] and [`TOOLSRV_BINARIES`]: what `toolsrv remote` keeps
//!   on either side (its control sockets and secrets; the binaries it installs);
//! - the server's own files, given by the server: the policy file, its
//!   profiles directory, the tools directory, the socket and its secret file.
//!
//! All but the first are carved whether or not they exist: a path that does not
//! exist yet is carved at its nearest existing ancestor, which then keeps only
//! its list right, so that no tool can create it (a policy file that a tool
//! creates would be loaded on the next call).

use std::path::{Component, Path, PathBuf};

use super::PathContext;

/// The protected paths, as patterns: `*` in the last component matches any
/// run of characters. Credential stores that are readable by root only on
/// common Linux systems.
pub(crate) const PROTECTED: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
];

/// The user's credential stores (policy path syntax, expanded against the
/// server's environment): keys, tokens, passwords and session cookies that
/// would let a tool act as the user elsewhere. Carved out of every rule,
/// readable ones included, whether they exist or not (a tool must not plant
/// `~/.ssh/authorized_keys` or `~/.ssh/config` either). The list is in
/// docs/sandbox-policy.md.
pub(crate) const CREDENTIAL_STORES: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.netrc",
    "~/.authinfo",
    "~/.authinfo.gpg",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.git-credentials",
    "~/.kube",
    "~/.docker/config.json",
    "~/.npmrc",
    "~/.pypirc",
    "~/.gem/credentials",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "{CARGO_HOME}/credentials",
    "{CARGO_HOME}/credentials.toml",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.vault-token",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.mozilla",
    "{XDG_CONFIG_HOME}/gh",
    "{XDG_CONFIG_HOME}/hub",
    "{XDG_CONFIG_HOME}/git/credentials",
    "{XDG_CONFIG_HOME}/gcloud",
    "{XDG_CONFIG_HOME}/op",
    "{XDG_CONFIG_HOME}/rclone",
    "{XDG_CONFIG_HOME}/sops",
    "{XDG_CONFIG_HOME}/google-chrome",
    "{XDG_CONFIG_HOME}/chromium",
    "~/.config/gh",
];

/// toolsrv's per-user directory (policy path syntax), both places it can
/// be (`toolsrv_base::userdir`), whole: the secrets the client generates,
/// the registry of live servers and bridges, and the state of `toolsrv
/// remote` on both sides (the local per-address directories with the SSH
/// control socket, the forwarded socket, the remote's secret, pid and state
/// files; on the remote host the remote server's state directory). Hidden:
/// carved like [`CREDENTIAL_STORES`], whether they exist or not. Where
/// `toolsrv remote` puts its files is in docs/remote.md.
pub(crate) const TOOLSRV_STATE: &[&str] =
    &["{XDG_RUNTIME_DIR}/toolsrv", "{XDG_STATE_HOME}/toolsrv"];

/// What `toolsrv remote` installs on a remote host (policy path syntax): the
/// server binaries and the content-addressed store of configuration files
/// they are configured from. Read-only under docs/policy-format.md, "Protected paths"; carving (the only
/// protection Landlock alone gives) hides them, which is stricter.
pub(crate) const TOOLSRV_BINARIES: &[&str] = &["{XDG_DATA_HOME}/toolsrv"];

/// Every path to carve for a resolution in `ctx`, canonical, sorted and
/// deduplicated: the readable `PROTECTED` files, the
/// `CREDENTIAL_STORES`, `TOOLSRV_STATE` and `TOOLSRV_BINARIES` of
/// `ctx`'s environment, and `server_files` (absolute paths; relative ones are
/// ignored). Paths that do not exist are included (see the module doc).
pub fn carved_paths(ctx: &PathContext, server_files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = existing_protected();
    let per_user = CREDENTIAL_STORES
        .iter()
        .chain(TOOLSRV_STATE)
        .chain(TOOLSRV_BINARIES);
    for raw in per_user {
        if let Ok(p) = ctx.expand(raw) {
            out.extend(anchored_forms(&p));
        }
    }
    for p in server_files.iter().filter(|p| p.is_absolute()) {
        out.extend(anchored_forms(p));
    }
    out.sort();
    out.dedup();
    out
}

/// The forms of `p` the carving must see, in its terms (canonical directory
/// prefixes): where the entry `p` lives (its canonical parent plus its own
/// name; for a missing `p` the canonical nearest existing ancestor plus the
/// rest), what it is (its canonical target, when it exists and differs), and
/// where every symbolic link on the way to it lives (replacing such a link
/// would redirect the path to a file of the tool's making).
fn anchored_forms(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut prefix = PathBuf::new();
    for c in p.components() {
        prefix.push(c);
        if matches!(c, Component::Normal(_))
            && prefix != p
            && std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink())
        {
            out.extend(entry_location(&prefix));
        }
    }
    out.extend(entry_location(p));
    if let Ok(target) = std::fs::canonicalize(p) {
        if !out.contains(&target) {
            out.push(target);
        }
    }
    out
}

/// `q`'s parent, canonical, joined with `q`'s own name (not followed).
fn entry_location(q: &Path) -> Option<PathBuf> {
    let name = q.file_name()?;
    Some(anchor(q.parent()?)?.join(name))
}

/// The canonical form of `dir`; for a missing `dir`, the canonical form of its
/// nearest existing ancestor joined with the missing rest.
pub(crate) fn anchor(dir: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut cur = dir;
    loop {
        if let Ok(mut c) = std::fs::canonicalize(cur) {
            c.extend(missing.iter().rev());
            return Some(c);
        }
        missing.push(cur.file_name()?);
        cur = cur.parent()?;
    }
}

/// The protected paths on this machine that toolsrv itself can read,
/// canonical. The others need no carving: tools run with toolsrv's
/// credentials and `no_new_privs`, so what toolsrv cannot read they cannot
/// either. A server that does not run as root usually carves nothing, and
/// pays nothing for this (a carved `/etc` is ~140 rules, which the kernel
/// copies into every sandboxed tool: ~60 µs per run on the 2-core test VM).
pub(crate) fn existing_protected() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pattern in PROTECTED {
        let pattern = Path::new(pattern);
        let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name()) else {
            continue;
        };
        let name = name.to_string_lossy();
        if !name.contains('*') {
            out.extend(std::fs::canonicalize(pattern).ok().filter(|p| readable(p)));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if name_matches(&name, &entry.file_name().to_string_lossy()) {
                out.extend(
                    std::fs::canonicalize(entry.path())
                        .ok()
                        .filter(|p| readable(p)),
                );
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether this process may read `path` (for a directory: list it).
fn readable(path: &Path) -> bool {
    super::sys::may_read(path)
}

/// Whether `name` matches `pattern`, whose `*`s match any run of characters.
pub(crate) fn name_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Rules for `granted` (canonical paths) that reach none of `protected`
/// through a directory: each directory with a protected path strictly inside
/// it is replaced by its entries (recursively), minus the protected ones and
/// minus symbolic links (a path through a link is checked against the rules
/// for its target, as it was under the directory's rule). Each replaced
/// directory is pushed onto `list`, to keep its contents listable.
pub(crate) fn carve(
    granted: Vec<PathBuf>,
    protected: &[PathBuf],
    list: &mut Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(granted.len());
    for path in granted {
        let inside: Vec<&Path> = protected
            .iter()
            .map(PathBuf::as_path)
            .filter(|p| *p != path && p.starts_with(&path))
            .collect();
        if inside.is_empty() {
            out.push(path);
        } else {
            split(&path, &inside, &mut out, list);
        }
    }
    out
}

/// `dir`'s entries as rules, splitting further where `inside` (protected
/// paths strictly inside `dir`) lie deeper.
fn split(dir: &Path, inside: &[&Path], out: &mut Vec<PathBuf>, list: &mut Vec<PathBuf>) {
    list.push(dir.to_path_buf());
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(e) => e.flatten().collect(),
        Err(e) => {
            // Not listable: nothing beneath it is granted rather than all of it.
            tracing::warn!(dir = %dir.display(), error = %e,
                "sandbox rule withheld: the directory holds a protected file and cannot be listed");
            return;
        }
    };
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if inside.contains(&path.as_path()) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        let deeper: Vec<&Path> = inside
            .iter()
            .copied()
            .filter(|p| p.starts_with(&path))
            .collect();
        if deeper.is_empty() {
            out.push(path);
        } else if kind.is_dir() {
            split(&path, &deeper, out, list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_a_shell_glob_in_one_component() {
        assert!(name_matches("ssh_host_*_key", "ssh_host_ed25519_key"));
        assert!(!name_matches("ssh_host_*_key", "ssh_host_ed25519_key.pub"));
        assert!(!name_matches("ssh_host_*_key", "ssh_host_key"));
        assert!(name_matches("shadow", "shadow"));
        assert!(!name_matches("shadow", "shadow-"));
        assert!(name_matches("a*b*c", "aXbYc"));
        assert!(!name_matches("a*b*c", "aXc"));
    }

    #[test]
    fn a_directory_is_split_around_protected_files_and_links_are_dropped() {
        let root = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(root.path()).unwrap();
        std::fs::write(r.join("a.txt"), "a").unwrap();
        std::fs::write(r.join("secret"), "s").unwrap();
        std::fs::create_dir(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/key"), "k").unwrap();
        std::fs::write(r.join("sub/ok.txt"), "ok").unwrap();
        std::fs::create_dir(r.join("other")).unwrap();
        std::os::unix::fs::symlink("/", r.join("link")).unwrap();
        let protected = vec![r.join("secret"), r.join("sub/key")];
        let elsewhere = PathBuf::from("/usr");
        let mut list = Vec::new();
        let out = carve(
            vec![r.clone(), elsewhere.clone(), r.join("secret")],
            &protected,
            &mut list,
        );
        assert_eq!(
            out,
            vec![
                r.join("a.txt"),
                r.join("other"),
                r.join("sub/ok.txt"),
                elsewhere,
                r.join("secret"),
            ]
        );
        assert_eq!(list, vec![r.clone(), r.join("sub")]);
    }

    #[test]
    fn missing_paths_and_links_on_the_way_are_anchored() {
        let root = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir_all(r.join("real/cfg")).unwrap();
        std::fs::write(r.join("real/cfg/policy.yaml"), "x").unwrap();
        std::os::unix::fs::symlink(r.join("real"), r.join("link")).unwrap();
        std::os::unix::fs::symlink(r.join("real/cfg/policy.yaml"), r.join("real/p")).unwrap();
        // A missing file under a missing directory: its nearest existing ancestor.
        assert_eq!(anchored_forms(&r.join("a/b/c")), vec![r.join("a/b/c")]);
        // Through a symbolic link: the link itself, and where the path leads.
        assert_eq!(
            anchored_forms(&r.join("link/cfg/policy.yaml")),
            vec![r.join("link"), r.join("real/cfg/policy.yaml")]
        );
        // A file that is a link: the link, and its target.
        assert_eq!(
            anchored_forms(&r.join("real/p")),
            vec![r.join("real/p"), r.join("real/cfg/policy.yaml")]
        );
        // And carving the missing path keeps each ancestor list-only, so
        // nothing can be created on the way to it.
        std::fs::write(r.join("other.txt"), "o").unwrap();
        let mut list = Vec::new();
        let out = carve(vec![r.clone()], &[r.join("a/b/c")], &mut list);
        assert_eq!(out, vec![r.join("other.txt"), r.join("real")]);
        assert_eq!(list, vec![r.clone()]);
    }

    #[test]
    fn credential_stores_come_from_home_and_server_files_are_added() {
        let home = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        std::fs::create_dir(h.join(".ssh")).unwrap();
        let ctx = PathContext {
            cwd: h.clone(),
            workdir: None,
            workspace: None,
            env: [("HOME".to_string(), h.display().to_string())].into(),
        };
        let extra = h.join("srv/toolsrv.sock.secret");
        let got = carved_paths(&ctx, &[extra.clone(), PathBuf::from("relative")]);
        for want in [
            h.join(".ssh"),
            h.join(".netrc"),
            h.join(".docker/config.json"),
            h.join(".config/gh"),
            extra,
        ] {
            assert!(
                got.contains(&want),
                "{} missing from {got:?}",
                want.display()
            );
        }
        assert!(!got.iter().any(|p| p.ends_with("relative")), "{got:?}");
    }

    #[test]
    fn remote_state_and_binaries_follow_the_xdg_variables() {
        let home = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        let ctx = |extra: &[(&str, String)]| PathContext {
            cwd: h.clone(),
            workdir: None,
            workspace: None,
            env: [("HOME".to_string(), h.display().to_string())]
                .into_iter()
                .chain(extra.iter().map(|(k, v)| (k.to_string(), v.clone())))
                .collect(),
        };
        let defaults = carved_paths(&ctx(&[]), &[]);
        for want in [
            h.join(".local/state/toolsrv"),
            h.join(".local/share/toolsrv"),
        ] {
            assert!(defaults.contains(&want), "{} missing", want.display());
        }
        let set = carved_paths(
            &ctx(&[
                ("XDG_RUNTIME_DIR", h.join("run").display().to_string()),
                ("XDG_STATE_HOME", h.join("st").display().to_string()),
                ("XDG_DATA_HOME", h.join("data").display().to_string()),
            ]),
            &[],
        );
        for want in [
            h.join("run/toolsrv"),
            h.join("st/toolsrv"),
            h.join("data/toolsrv"),
        ] {
            assert!(
                set.contains(&want),
                "{} missing from {set:?}",
                want.display()
            );
        }
    }

    #[test]
    fn the_protected_list_is_found_on_this_machine_and_canonical() {
        let found = existing_protected();
        for p in &found {
            assert!(p.is_absolute() && p.exists(), "{}", p.display());
            assert_eq!(&std::fs::canonicalize(p).unwrap(), p);
        }
        if let Ok(shadow) = std::fs::canonicalize("/etc/shadow") {
            let readable = std::fs::read(&shadow).is_ok();
            assert_eq!(found.contains(&shadow), readable, "{found:?}");
        }
    }
}
