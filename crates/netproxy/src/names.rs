//! The addresses the DNS stub hands out: one per listed name, from
//! `198.18.0.0/15` (reserved for benchmarks, RFC 2544, so never a real
//! host's), and the name each stands for. A connection captured in the
//! run's namespace to such an address goes to that name; to any other
//! address it is refused.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

/// The first address handed out (`198.18.0.1`).
const FIRST: u32 = u32::from_be_bytes([198, 18, 0, 1]);

/// How many names one run may have addresses for (the range's size).
const MOST: u32 = 1 << 17;

/// A run's names and their stand-in addresses.
#[derive(Debug, Default)]
pub struct Names(Mutex<Table>);

#[derive(Debug, Default)]
struct Table {
    by_name: HashMap<String, Ipv4Addr>,
    by_address: HashMap<Ipv4Addr, String>,
}

impl Names {
    /// The address standing for `name` (normalized), given on first ask;
    /// `None` once the range is used up.
    pub fn address(&self, name: &str) -> Option<Ipv4Addr> {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = t.by_name.get(name) {
            return Some(*a);
        }
        let n = u32::try_from(t.by_name.len())
            .ok()
            .filter(|&n| n + 1 < MOST)?;
        let a = Ipv4Addr::from(FIRST + n);
        t.by_name.insert(name.to_string(), a);
        t.by_address.insert(a, name.to_string());
        Some(a)
    }

    /// The name `ip` stands for, if the stub gave it out.
    pub fn name(&self, ip: IpAddr) -> Option<String> {
        let v4 = match ip {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(v6) => v6.to_ipv4_mapped()?,
        };
        let t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        t.by_address.get(&v4).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_address_and_an_address_maps_back() {
        let n = Names::default();
        let a = n.address("pypi.org").unwrap();
        assert_eq!(a, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(n.address("pypi.org"), Some(a));
        let b = n.address("github.com").unwrap();
        assert_ne!(a, b);
        assert_eq!(n.name(IpAddr::V4(b)).as_deref(), Some("github.com"));
        assert_eq!(
            n.name(IpAddr::V6(a.to_ipv6_mapped())).as_deref(),
            Some("pypi.org")
        );
        assert_eq!(n.name("198.18.9.9".parse().unwrap()), None);
    }
}
