//! The hosts a run may reach: the policy's `network.domains` lines
//! (`pypi.org`, `*.pythonhosted.org`, `github.com:22`; an address or a
//! range by itself, `10.0.0.5:5432`, `192.168.1.0/24`, `[fd00::1]:8443`,
//! which may then be private or loopback) and its
//! `network.hosts` pins (a name fixed to addresses, which may then be
//! loopback or private: a test upstream, a registry mirror on the LAN).

use std::collections::HashMap;
use std::net::IpAddr;

/// One `domains` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The line as written (a refusal names the line that would allow it).
    pub line: String,
    pattern: Pattern,
    ports: Ports,
}

impl Entry {
    /// Whether the line names `host` (normalized), on whatever port.
    fn names(&self, host: &str) -> bool {
        match &self.pattern {
            Pattern::Exact(n) => n == host,
            Pattern::Below(s) => {
                host.len() > s.len() + 1
                    && host.ends_with(s.as_str())
                    && host.as_bytes()[host.len() - s.len() - 1] == b'.'
            }
            Pattern::Range(..) => false,
        }
    }

    /// Whether the line is an address or range holding `ip`.
    fn holds(&self, ip: IpAddr) -> bool {
        let Pattern::Range(net, prefix) = self.pattern else {
            return false;
        };
        match (net, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

    fn port_ok(&self, port: u16) -> bool {
        match self.ports {
            Ports::Web => port == 80 || port == 443,
            Ports::One(p) => p == port,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// The name itself.
    Exact(String),
    /// Every name below `.suffix` (not the suffix itself).
    Below(String),
    /// An address (a prefix of its full length) or a range.
    Range(IpAddr, u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    /// 80 and 443, when the line names no port.
    Web,
    /// The one port the line names.
    One(u16),
}

/// A `domains` line or `hosts` pin that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllowError {
    /// The line is not a host name, `*.` and a name, with an optional port.
    #[error("network.domains: {line:?} is not a host name (like pypi.org, *.pythonhosted.org or github.com:22): {why}")]
    Domain {
        /// The line.
        line: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A pin's name is not a host name, or it has no address.
    #[error("network.hosts: {name:?} {why}")]
    Pin {
        /// The pinned name.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The allowlist of one policy.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    entries: Vec<Entry>,
    pins: HashMap<String, Vec<IpAddr>>,
}

impl Allowlist {
    /// The allowlist of `domains` lines and `pins` (name → addresses).
    pub fn new(
        domains: &[String],
        pins: &[(String, Vec<IpAddr>)],
    ) -> Result<Allowlist, AllowError> {
        let entries = domains
            .iter()
            .map(|l| parse_line(l))
            .collect::<Result<Vec<_>, _>>()?;
        let mut map = HashMap::new();
        for (name, addrs) in pins {
            let n = normalize(name);
            if !is_host_name(&n) {
                return Err(AllowError::Pin {
                    name: name.clone(),
                    why: "is not a host name",
                });
            }
            if addrs.is_empty() {
                return Err(AllowError::Pin {
                    name: name.clone(),
                    why: "is pinned to no address",
                });
            }
            map.insert(n, addrs.clone());
        }
        Ok(Allowlist { entries, pins: map })
    }

    /// The line that allows `host:port`, if one does. `host` is compared
    /// without case and without a trailing dot.
    pub fn allows(&self, host: &str, port: u16) -> Option<&Entry> {
        let host = normalize(host);
        self.entries
            .iter()
            .find(|e| e.names(&host) && e.port_ok(port))
    }

    /// The address or range line that allows `ip:port`, if one does.
    pub fn allows_address(&self, ip: IpAddr, port: u16) -> Option<&Entry> {
        self.entries.iter().find(|e| e.holds(ip) && e.port_ok(port))
    }

    /// The line that lists `host` on some port, if one does (the DNS stub
    /// answers such a name).
    pub fn lists(&self, host: &str) -> Option<&Entry> {
        let host = normalize(host);
        self.entries.iter().find(|e| e.names(&host))
    }

    /// The ports some line names (80 and 443 for a line without one), each
    /// once, in order: those a run's namespace captures.
    pub fn ports(&self) -> Vec<u16> {
        let mut p: Vec<u16> = self
            .entries
            .iter()
            .flat_map(|e| match e.ports {
                Ports::Web => vec![80, 443],
                Ports::One(p) => vec![p],
            })
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// The addresses `host` is pinned to, if it is.
    pub fn pinned(&self, host: &str) -> Option<&[IpAddr]> {
        self.pins.get(&normalize(host)).map(Vec::as_slice)
    }

    /// Whether no line allows anything.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A name as compared: lower case, no trailing dot.
pub(crate) fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Letters, digits, `-` and `_` in dot-separated labels of 1–63 bytes, at
/// most 253 bytes in all, and not an IPv4 literal.
pub(crate) fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.parse::<IpAddr>().is_err()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

fn parse_line(line: &str) -> Result<Entry, AllowError> {
    let bad = |why| AllowError::Domain {
        line: line.to_string(),
        why,
    };
    if let Some(range) = parse_range(line) {
        return range.map_err(bad);
    }
    let (name, ports) = match line.rsplit_once(':') {
        Some((n, p)) => {
            let port: u16 = p
                .parse()
                .map_err(|_| bad("the port is not a number from 1 to 65535"))?;
            if port == 0 {
                return Err(bad("the port is not a number from 1 to 65535"));
            }
            (n, Ports::One(port))
        }
        None => (line, Ports::Web),
    };
    let name = normalize(name.trim());
    let pattern = match name.strip_prefix("*.") {
        Some(rest) if rest.contains('.') => Pattern::Below(rest.to_string()),
        Some(_) => {
            return Err(bad(
                "a wildcard needs a name with a dot after it (*.example.com)",
            ))
        }
        None if name.contains('*') => {
            return Err(bad("a wildcard stands only at the start, as *."))
        }
        None => Pattern::Exact(name.clone()),
    };
    let checked = match &pattern {
        Pattern::Exact(n) | Pattern::Below(n) => n,
        Pattern::Range(..) => return Err(bad("not a name")),
    };
    if !is_host_name(checked) {
        return Err(bad(
            "only letters, digits, '-' and '_' in dot-separated labels; an address is not a name",
        ));
    }
    Ok(Entry {
        line: line.to_string(),
        pattern,
        ports,
    })
}

/// An address or range line (`10.0.0.5`, `10.0.0.0/8:5432`, `fd00::1`,
/// `[fd00::/16]:8443`): `None` when the line is not one (a name).
fn parse_range(line: &str) -> Option<Result<Entry, &'static str>> {
    let line_t = line.trim();
    let (body, port) = if let Some(rest) = line_t.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Some(Err("after \"]\" only \":port\" may follow")),
        };
        (inside, port)
    } else if line_t.matches(':').count() > 1 {
        (line_t, None)
    } else {
        match line_t.rsplit_once(':') {
            Some((b, p)) => (b, Some(p)),
            None => (line_t, None),
        }
    };
    let (addr, prefix) = match body.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (body, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    let full = if addr.is_ipv4() { 32 } else { 128 };
    let prefix =
        match prefix {
            None => full,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= full => n,
                _ => return Some(Err(
                    "the range's prefix length is not a number from 0 to 32 (IPv4) or 128 (IPv6)",
                )),
            },
        };
    let ports = match port {
        None => Ports::Web,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n != 0 => Ports::One(n),
            _ => return Some(Err("the port is not a number from 1 to 65535")),
        },
    };
    Some(Ok(Entry {
        line: line.to_string(),
        pattern: Pattern::Range(addr, prefix),
        ports,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(lines: &[&str]) -> Allowlist {
        let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        Allowlist::new(&lines, &[]).expect("valid lines")
    }

    #[test]
    fn names_ports_and_wildcards_match_as_written() {
        let a = list(&["pypi.org", "*.pythonhosted.org", "github.com:22"]);
        assert!(a.allows("pypi.org", 443).is_some());
        assert!(a.allows("PyPI.org.", 80).is_some());
        assert!(a.allows("pypi.org", 22).is_none());
        assert!(a.allows("evilpypi.org", 443).is_none());
        assert!(a.allows("pypi.org.evil.com", 443).is_none());
        assert!(a.allows("files.pythonhosted.org", 443).is_some());
        assert!(a.allows("a.b.pythonhosted.org", 443).is_some());
        assert!(a.allows("pythonhosted.org", 443).is_none());
        assert!(a.allows("xpythonhosted.org", 443).is_none());
        assert_eq!(
            a.allows("github.com", 22).map(|e| e.line.as_str()),
            Some("github.com:22")
        );
        assert!(a.allows("github.com", 443).is_none());
    }

    #[test]
    fn addresses_and_ranges_allow_what_they_hold_on_their_ports() {
        let a = list(&["10.0.0.0/8:5432", "192.168.1.7", "fd00::/16", "[::1]:8443"]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(a.allows_address(ip("10.20.30.40"), 5432).is_some());
        assert!(a.allows_address(ip("10.20.30.40"), 443).is_none());
        assert!(a.allows_address(ip("11.0.0.1"), 5432).is_none());
        assert!(a.allows_address(ip("192.168.1.7"), 443).is_some());
        assert!(a.allows_address(ip("192.168.1.8"), 443).is_none());
        assert!(a.allows_address(ip("::ffff:192.168.1.7"), 80).is_some());
        assert!(a.allows_address(ip("fd00:1::5"), 443).is_some());
        assert!(a.allows_address(ip("::1"), 8443).is_some());
        assert!(a.allows_address(ip("::1"), 443).is_none());
        assert!(
            a.allows("10.0.0.1", 5432).is_none(),
            "a range is not a name"
        );
        assert_eq!(a.ports(), vec![80, 443, 5432, 8443]);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for (line, part) in [
            ("", "letters, digits"),
            ("*.com", "wildcard needs"),
            ("a.*.com", "only at the start"),
            ("pypi.org:0", "port"),
            ("pypi.org:https", "port"),
            ("10.0.0.0/33", "prefix length"),
            ("[::1]x", "only \":port\""),
            ("exa mple.com", "letters, digits"),
        ] {
            let e = Allowlist::new(&[line.to_string()], &[]).expect_err(line);
            let text = e.to_string();
            assert!(
                text.contains(&format!("{line:?}")) && text.contains(part),
                "{line}: {text}"
            );
        }
        let e = Allowlist::new(&[], &[("up.test".into(), vec![])]).expect_err("no address");
        assert_eq!(
            e.to_string(),
            "network.hosts: \"up.test\" is pinned to no address"
        );
    }

    proptest::proptest! {
        /// Any line is a valid entry or a refusal naming it; never a panic.
        #[test]
        fn any_line_parses_or_is_refused_by_name(line in "\\PC{0,40}") {
            match Allowlist::new(std::slice::from_ref(&line), &[]) {
                Ok(a) => {
                    let _ = a.ports();
                    let _ = a.allows(&line, 443);
                }
                Err(e) => {
                    let named = format!("{:?}", line);
                    proptest::prop_assert!(e.to_string().contains(&named), "{}", e);
                }
            }
        }
    }
}
