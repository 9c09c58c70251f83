//! What kind of address a name resolved to: the proxy connects only to
//! public addresses unless the destination was pinned to an address
//! (`network.hosts`) by the policy, so a listed name that resolves to the
//! loopback, a private network or a cloud's metadata service reaches none
//! of them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The kind of an address, as the proxy judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressKind {
    /// A public unicast address.
    Public,
    /// `0.0.0.0/8`, `::`: "this host".
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`) and IPv6 unique local
    /// addresses (`fc00::/7`).
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// The shared address space of carrier-grade NAT, `100.64.0.0/10`.
    Cgnat,
    /// A cloud's instance-metadata address: `169.254.169.254`,
    /// `fd00:ec2::254`, `100.100.100.200`.
    Metadata,
    /// Multicast, broadcast and reserved ranges, and the DNS stub's
    /// stand-in addresses (`198.18.0.0/15`).
    Reserved,
}

impl AddressKind {
    /// Whether the proxy may connect to such an address without a pin.
    pub fn is_public(self) -> bool {
        self == AddressKind::Public
    }

    /// How a refusal names it.
    pub fn describe(self) -> &'static str {
        match self {
            AddressKind::Public => "a public address",
            AddressKind::Unspecified => "the unspecified address",
            AddressKind::Loopback => "a loopback address",
            AddressKind::Private => "a private network address",
            AddressKind::LinkLocal => "a link-local address",
            AddressKind::Cgnat => "a carrier-grade NAT address",
            AddressKind::Metadata => "a cloud metadata address",
            AddressKind::Reserved => "a reserved address",
        }
    }
}

/// The kind of `ip`; an IPv4-mapped or IPv4-compatible IPv6 address
/// (`::ffff:127.0.0.1`) is judged as the IPv4 address it carries.
pub fn classify(ip: IpAddr) -> AddressKind {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped().or_else(|| compatible(v6)) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

/// The IPv4 address of a deprecated IPv4-compatible address (`::a.b.c.d`,
/// not `::` or `::1`).
fn compatible(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    (s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1)).then(|| {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    })
}

fn classify_v4(ip: Ipv4Addr) -> AddressKind {
    let [a, b, c, d] = ip.octets();
    if [a, b, c, d] == [169, 254, 169, 254] || [a, b, c, d] == [100, 100, 100, 200] {
        return AddressKind::Metadata;
    }
    match (a, b) {
        (0, _) => AddressKind::Unspecified,
        (127, _) => AddressKind::Loopback,
        (10, _) | (192, 168) => AddressKind::Private,
        (172, b) if (16..32).contains(&b) => AddressKind::Private,
        (169, 254) => AddressKind::LinkLocal,
        (100, b) if (64..128).contains(&b) => AddressKind::Cgnat,
        (192, 0) if c == 0 => AddressKind::Reserved,
        // The stand-in addresses of a run's DNS stub (`crate::names`).
        (198, 18 | 19) => AddressKind::Reserved,
        (224..=255, _) => AddressKind::Reserved,
        // The documentation ranges (192.0.2/24, 198.51.100/24,
        // 203.0.113/24) are routed nowhere on the internet, so reaching one
        // reaches nothing of anyone's; some networks answer there (an
        // egress proxy that resolves every name to 203.0.113.x), and there
        // a listed name must work.
        _ => AddressKind::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressKind {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254) {
        return AddressKind::Metadata;
    }
    if ip.is_unspecified() {
        return AddressKind::Unspecified;
    }
    if ip.is_loopback() {
        return AddressKind::Loopback;
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddressKind::Private,
        x if x & 0xffc0 == 0xfe80 => AddressKind::LinkLocal,
        x if x & 0xff00 == 0xff00 => AddressKind::Reserved,
        // NAT64 (64:ff9b::/96) carries an IPv4 address: judged as that one.
        0x0064 if s[1] == 0xff9b && s[2..6] == [0; 4] => {
            let [a, b] = s[6].to_be_bytes();
            let [c, d] = s[7].to_be_bytes();
            classify_v4(Ipv4Addr::new(a, b, c, d))
        }
        _ => AddressKind::Public,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> AddressKind {
        classify(s.parse().expect("an address"))
    }

    #[test]
    fn the_addresses_a_tool_must_not_reach_are_named() {
        for (a, k) in [
            ("0.0.0.0", AddressKind::Unspecified),
            ("::", AddressKind::Unspecified),
            ("127.0.0.1", AddressKind::Loopback),
            ("127.1.2.3", AddressKind::Loopback),
            ("::1", AddressKind::Loopback),
            ("::ffff:127.0.0.1", AddressKind::Loopback),
            ("::127.0.0.1", AddressKind::Loopback),
            ("64:ff9b::7f00:1", AddressKind::Loopback),
            ("10.1.2.3", AddressKind::Private),
            ("172.16.0.1", AddressKind::Private),
            ("172.31.255.255", AddressKind::Private),
            ("192.168.1.1", AddressKind::Private),
            ("fd12::1", AddressKind::Private),
            ("169.254.1.1", AddressKind::LinkLocal),
            ("fe80::1", AddressKind::LinkLocal),
            ("100.64.0.1", AddressKind::Cgnat),
            ("100.127.255.254", AddressKind::Cgnat),
            ("169.254.169.254", AddressKind::Metadata),
            ("::ffff:169.254.169.254", AddressKind::Metadata),
            ("fd00:ec2::254", AddressKind::Metadata),
            ("100.100.100.200", AddressKind::Metadata),
            ("224.0.0.1", AddressKind::Reserved),
            ("255.255.255.255", AddressKind::Reserved),
            ("ff02::1", AddressKind::Reserved),
            ("198.18.0.1", AddressKind::Reserved),
        ] {
            assert_eq!(kind(a), k, "{a}");
            assert!(!k.is_public(), "{a}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for a in [
            "151.101.0.223",
            "172.32.0.1",
            "100.128.0.1",
            "8.8.8.8",
            "2a04:4e42::223",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "203.0.113.80",
            "192.0.2.1",
            "2001:db8::1",
        ] {
            assert_eq!(kind(a), AddressKind::Public, "{a}");
        }
    }
}
