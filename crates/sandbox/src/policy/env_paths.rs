//! The files a passed-through variable names: a variable of the policy's
//! `env` list whose value (in toolsrv's own environment) is a local path, a
//! `file://` URL, or a list of them (`PIP_FIND_LINKS="/srv/wheels
//! file:///opt/more"`, `SSL_CERT_FILE=/etc/corp-ca.pem`, `SSL_CERT_DIR=/a:/b`)
//! gets those paths read-only for the run, as a `ro: ["{VAR}"]` rule would:
//! the variable reaching the tool is no use when what it names does not.
//!
//! Not for the variables that name a home or a toolchain's root, whose parts
//! the policy grants by rules of its own (granting `PATH`'s every directory
//! or all of `$HOME` read-only would grant far more than they mean), nor for
//! a path that is `/` or holds `$HOME`. A request's own `env.NAME` fields
//! never count: only what the human started toolsrv with.

use std::path::{Path, PathBuf};

use super::{PathContext, Policy};

/// Variables whose paths are not granted this way (see the module).
pub(crate) const NOT_GRANTED: &[&str] = &[
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "TMPDIR",
    "SHELL",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];

impl Policy {
    /// The absolute paths the passed-through variables name, as written
    /// (not checked for existence), with the variable each came from.
    pub(crate) fn env_named_paths(&self, ctx: &PathContext) -> Vec<(String, PathBuf)> {
        let home = ctx.env.get("HOME").map(PathBuf::from);
        let mut out = Vec::new();
        for name in &self.env {
            if NOT_GRANTED.contains(&name.as_str()) {
                continue;
            }
            let Some(value) = ctx.env.get(name) else {
                continue;
            };
            for p in paths_in(value) {
                let too_wide =
                    p == Path::new("/") || home.as_deref().is_some_and(|h| h.starts_with(&p));
                if too_wide {
                    tracing::warn!(variable = %name, path = %p.display(), "a passed variable names / or a directory holding $HOME: not granted");
                    continue;
                }
                if !out.iter().any(|(_, q)| *q == p) {
                    out.push((name.clone(), p));
                }
            }
        }
        out
    }
}

/// The local paths in a variable's value: each whitespace-separated word
/// that is an absolute path (or a `:`-separated list of them) or a
/// `file://` URL (its host empty or `localhost`, percent-escapes decoded).
fn paths_in(value: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for word in value.split_whitespace() {
        if let Some(rest) = word.strip_prefix("file://") {
            let path = rest.strip_prefix("localhost").unwrap_or(rest);
            if path.starts_with('/') {
                if let Some(p) = percent_decoded(path) {
                    out.push(PathBuf::from(p));
                }
            }
        } else if word.starts_with('/') {
            out.extend(
                word.split(':')
                    .filter(|p| p.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    out
}

/// `s` with `%XX` escapes decoded; `None` when that is not UTF-8 or an
/// escape is malformed.
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_urls_and_lists_are_found_and_remote_urls_are_not() {
        let got = paths_in(
            "/srv/wheels file:///opt/more%20wheels file://localhost/x https://pypi.org/simple rel/dir /a:/b:c",
        );
        let want: Vec<PathBuf> = ["/srv/wheels", "/opt/more wheels", "/x", "/a", "/b"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
        assert!(paths_in("file://host/x http://127.0.0.1:8080/simple").is_empty());
        assert_eq!(percent_decoded("/a%2"), None);
    }

    #[test]
    fn only_passed_variables_count_and_never_a_home_or_root() {
        let policy = Policy::parse(super::super::DEFAULT_POLICY, Path::new("<built-in>"))
            .expect("built-in policy");
        let env = [
            ("HOME", "/home/u"),
            ("PATH", "/home/u/bin:/usr/bin"),
            ("PIP_FIND_LINKS", "/srv/wheels file:///srv/more"),
            ("SSL_CERT_FILE", "/etc/corp-ca.pem"),
            ("REQUESTS_CA_BUNDLE", "/"),
            ("CURL_CA_BUNDLE", "/home"),
            ("NOT_IN_THE_POLICY", "/secret"),
        ];
        let ctx = PathContext {
            cwd: PathBuf::from("/"),
            workdir: None,
            workspace: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let got: Vec<(String, PathBuf)> = policy.env_named_paths(&ctx);
        let want: Vec<(String, PathBuf)> = [
            ("SSL_CERT_FILE", "/etc/corp-ca.pem"),
            ("PIP_FIND_LINKS", "/srv/wheels"),
            ("PIP_FIND_LINKS", "/srv/more"),
        ]
        .iter()
        .map(|(k, p)| (k.to_string(), PathBuf::from(p)))
        .collect();
        assert_eq!(got, want);
    }
}
