//! Server addresses: a Unix socket path, or `ssh://[user@]host[:port][/remote/socket]`
//! for a toolsrv on another host reached through an SSH-forwarded socket
//! (docs/remote.md).

use std::fmt;
use std::path::{Path, PathBuf};

/// The scheme of remote addresses.
pub const SSH_SCHEME: &str = "ssh://";

/// Why an `ssh://` address cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid address {address:?}: {reason}")]
pub struct AddressError {
    /// The address as given.
    pub address: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A local Unix socket.
    Local(PathBuf),
    /// A server on another host, over SSH.
    Ssh(SshAddress),
}

/// `ssh://[user@]host[:port][/remote/socket]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshAddress {
    /// The remote user (ssh's default, e.g. from `~/.ssh/config`, when absent).
    pub user: Option<String>,
    /// The host name, an alias from `~/.ssh/config`, or an IP address.
    pub host: String,
    /// The SSH port (ssh's default when absent).
    pub port: Option<u16>,
    /// The remote socket path (the remote runtime directory's `toolsrv.sock`
    /// when absent).
    pub socket: Option<String>,
}

impl Address {
    /// Parse a socket argument: `ssh://…` is remote, anything else a local path.
    pub fn parse(s: &Path) -> Result<Address, AddressError> {
        match s.to_str() {
            Some(t) if t.starts_with(SSH_SCHEME) => SshAddress::parse(t).map(Address::Ssh),
            _ => Ok(Address::Local(s.to_path_buf())),
        }
    }
}

/// A user or host name ssh takes as it is: never empty, never an option.
fn plain(s: &str, what: &str, extra: &[char]) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("empty {what}"));
    }
    if s.starts_with('-') {
        return Err(format!("{what} {s:?} starts with '-'"));
    }
    match s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c) || extra.contains(c)))
    {
        Some(c) => Err(format!("{what} {s:?} contains {c:?}")),
        None => Ok(()),
    }
}

impl SshAddress {
    /// Parse `ssh://[user@]host[:port][/remote/socket]`; IPv6 hosts in brackets.
    pub fn parse(s: &str) -> Result<SshAddress, AddressError> {
        let err = |reason: String| AddressError {
            address: s.to_string(),
            reason,
        };
        let rest = s
            .strip_prefix(SSH_SCHEME)
            .ok_or_else(|| err(format!("does not start with {SSH_SCHEME}")))?;
        let (authority, socket) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        if let Some(u) = user {
            plain(u, "user", &[]).map_err(err)?;
        }
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| err("'[' without ']'".into()))?;
            plain(h, "host", &[':']).map_err(err)?;
            match after {
                "" => (h, None),
                p => (
                    h,
                    Some(
                        p.strip_prefix(':')
                            .ok_or_else(|| err(format!("unexpected {p:?} after ']'")))?,
                    ),
                ),
            }
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if !hostport.starts_with('[') {
            plain(host, "host", &[]).map_err(err)?;
        }
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| err(format!("port {p:?} is not 1-65535")))?,
            ),
        };
        let socket = match socket {
            None | Some("/") => None,
            Some(p) => {
                if p.chars().any(|c| c.is_control()) {
                    return Err(err("the socket path contains a control character".into()));
                }
                if p.split('/').any(|e| e == "..") {
                    return Err(err("the socket path contains '..'".into()));
                }
                Some(p.to_string())
            }
        };
        Ok(SshAddress {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            socket,
        })
    }

    /// A short name for this address, usable as a file name: the host, user
    /// and port, and a hash of the whole address (so custom sockets differ).
    pub fn key(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.to_string().hash(&mut h);
        let mut name = String::new();
        if let Some(u) = &self.user {
            name.push_str(u);
            name.push('@');
        }
        name.push_str(&self.host.replace(':', "_"));
        if let Some(p) = self.port {
            name.push_str(&format!("_{p}"));
        }
        name.truncate(40);
        format!("{name}-{:08x}", h.finish() as u32)
    }
}

impl fmt::Display for SshAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SSH_SCHEME)?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        if let Some(s) = &self.socket {
            f.write_str(s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> SshAddress {
        SshAddress::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_every_part() {
        let a = ok("ssh://bob@build.example:2222/run/t.sock");
        assert_eq!(a.user.as_deref(), Some("bob"));
        assert_eq!(a.host, "build.example");
        assert_eq!(a.port, Some(2222));
        assert_eq!(a.socket.as_deref(), Some("/run/t.sock"));
        assert_eq!(a.to_string(), "ssh://bob@build.example:2222/run/t.sock");
        let b = ok("ssh://box");
        assert_eq!((b.user, b.port, b.socket), (None, None, None));
        let c = ok("ssh://[::1]:22");
        assert_eq!((c.host.as_str(), c.port), ("::1", Some(22)));
        assert_eq!(c.to_string(), "ssh://[::1]:22");
        assert_eq!(ok("ssh://h/").socket, None);
    }

    #[test]
    fn refuses_what_ssh_would_take_as_an_option_or_worse() {
        for bad in [
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://u@-h",
            "ssh://-u@h",
            "ssh://h:0",
            "ssh://h:99999",
            "ssh://h:x",
            "ssh://h;rm",
            "ssh://h o",
            "ssh://h/a/../b",
            "ssh://h/a\nb",
            "ssh://[::1",
            "http://h",
        ] {
            assert!(SshAddress::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn local_paths_stay_paths_and_keys_are_short_file_names() {
        assert_eq!(
            Address::parse(Path::new("/tmp/x.sock")),
            Ok(Address::Local("/tmp/x.sock".into()))
        );
        let k = ok("ssh://bob@h:2222").key();
        assert!(k.starts_with("bob@h_2222-"), "{k}");
        assert!(!k.contains('/'));
        assert_ne!(k, ok("ssh://bob@h:2222/other.sock").key());
    }
}
