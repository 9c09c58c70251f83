//! The DNS stub of a run's network namespace: every UDP packet to port 53
//! of any address there reaches it. It answers one question per query: a
//! listed name (`network.domains`, any port) gets an `A` record with the
//! stand-in address of [`crate::names`], valid for a minute; an `AAAA` or
//! other question for it gets no record (the client falls back to IPv4);
//! any other name is `NXDOMAIN`, recorded. No query is ever forwarded, so
//! DNS carries nothing out of the run. Written here rather than taken from
//! a DNS library: one question, one record (docs/decisions.md).

use std::sync::Arc;

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use crate::allow::normalize;
use crate::denial::{Denial, DenialKind};
use crate::gate::Gate;

/// Response codes.
const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
const NXDOMAIN: u8 = 3;
const NOTIMP: u8 = 4;

/// Types and class.
const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

/// The answer's time to live, in seconds.
const TTL: u32 = 60;

/// Answers queries on `sock` until `stop`, under the gate of the run
/// served at the time (none: no answer).
pub(crate) async fn serve(sock: UdpSocket, slot: Arc<crate::run::Slot>, stop: CancellationToken) {
    let mut buf = [0u8; 1500];
    loop {
        let got = tokio::select! {
            () = stop.cancelled() => return,
            r = sock.recv_from(&mut buf) => r,
        };
        let Ok((n, from)) = got else {
            continue;
        };
        let Some(gate) = slot.gate() else {
            continue;
        };
        if let Some(reply) = answer(&buf[..n], &gate) {
            let _ = sock.send_to(&reply, from).await;
        }
    }
}

/// The reply to `query`; `None` for a packet that is not a query.
pub(crate) fn answer(query: &[u8], gate: &Gate) -> Option<Vec<u8>> {
    let header = query.get(..12)?;
    if header[2] & 0x80 != 0 {
        return None;
    }
    let opcode = (header[2] >> 3) & 0x0f;
    let count = u16::from_be_bytes([header[4], header[5]]);
    if opcode != 0 {
        return Some(reply(header, &[], NOTIMP, None));
    }
    let Some((name, end)) = question(query).filter(|_| count == 1) else {
        return Some(reply(header, &[], FORMERR, None));
    };
    let q = &query[12..end];
    let qtype = u16::from_be_bytes([query[end - 4], query[end - 3]]);
    let qclass = u16::from_be_bytes([query[end - 2], query[end - 1]]);
    let name = normalize(&name);
    if gate.allow.lists(&name).is_none() {
        gate.denials.push(Denial {
            time: std::time::SystemTime::now(),
            kind: DenialKind::Domain,
            access: "resolve",
            target: name.clone(),
            reason: format!("toolsrv: {name} is not in the sandbox's network.domains"),
            allow: format!("network.domains: [\"{name}\"]"),
        });
        return Some(reply(header, q, NXDOMAIN, None));
    }
    let address = (qtype == TYPE_A && qclass == CLASS_IN)
        .then(|| gate.names.address(&name))
        .flatten();
    Some(reply(header, q, NOERROR, address))
}

/// The question's name and where the question ends (after its type and
/// class); `None` when it does not parse (compression has no place in a
/// question).
fn question(query: &[u8]) -> Option<(String, usize)> {
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        let label = query.get(at..at + len)?;
        labels.push(String::from_utf8_lossy(label).into_owned());
        at += len;
    }
    let end = at + 4;
    (end <= query.len() && !labels.is_empty()).then(|| (labels.join("."), end))
}

/// A response to `header` carrying `question` (empty: none) and, with
/// `address`, one `A` record for it.
fn reply(header: &[u8], question: &[u8], code: u8, address: Option<std::net::Ipv4Addr>) -> Vec<u8> {
    let mut r = Vec::with_capacity(12 + question.len() + 16);
    r.extend_from_slice(&header[..2]);
    // QR, the query's opcode and RD; RA and the code.
    r.push(0x80 | (header[2] & 0x79));
    r.push(0x80 | code);
    let qd = u16::from(!question.is_empty());
    let an = u16::from(address.is_some());
    for n in [qd, an, 0, 0] {
        r.extend_from_slice(&n.to_be_bytes());
    }
    r.extend_from_slice(question);
    if let Some(a) = address {
        r.extend_from_slice(&[0xc0, 0x0c]);
        r.extend_from_slice(&TYPE_A.to_be_bytes());
        r.extend_from_slice(&CLASS_IN.to_be_bytes());
        r.extend_from_slice(&TTL.to_be_bytes());
        r.extend_from_slice(&4u16.to_be_bytes());
        r.extend_from_slice(&a.octets());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allow::Allowlist;

    fn gate(lines: &[&str]) -> Gate {
        let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        Gate {
            allow: Allowlist::new(&lines, &[]).unwrap(),
            head_timeout: crate::proxy::HEAD_TIMEOUT,
            own: Vec::new(),
            denials: Default::default(),
            names: Arc::default(),
            credentials: None,
            secrets: Default::default(),
            tls: None,
        }
    }

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    #[test]
    fn a_listed_name_gets_its_stand_in_and_another_nothing() {
        let g = gate(&["pypi.org", "*.github.com:22"]);
        let r = answer(&query("PyPI.org", TYPE_A), &g).unwrap();
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert_eq!(r[3] & 0x0f, NOERROR);
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "one answer");
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 1]);
        let r = answer(&query("ssh.github.com", TYPE_A), &g).unwrap();
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 2]);
        let r = answer(&query("pypi.org", 28), &g).unwrap();
        assert_eq!((r[3] & 0x0f, r[7]), (NOERROR, 0), "no AAAA");
        let r = answer(&query("secret-data.evil.test", TYPE_A), &g).unwrap();
        assert_eq!((r[3] & 0x0f, r[7]), (NXDOMAIN, 0));
        let d = g.denials.list();
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].access, d[0].target.as_str()),
            ("resolve", "secret-data.evil.test")
        );
        assert_eq!(d[0].allow, "network.domains: [\"secret-data.evil.test\"]");
    }

    #[test]
    fn what_is_not_one_plain_question_gets_an_error_or_nothing() {
        let g = gate(&["pypi.org"]);
        assert_eq!(answer(&[1, 2, 3], &g), None, "too short");
        let mut reply_bit = query("pypi.org", TYPE_A);
        reply_bit[2] |= 0x80;
        assert_eq!(answer(&reply_bit, &g), None, "a response is not answered");
        let mut cut = query("pypi.org", TYPE_A);
        cut.truncate(cut.len() - 3);
        assert_eq!(answer(&cut, &g).unwrap()[3] & 0x0f, FORMERR);
        let mut pointer = query("pypi.org", TYPE_A);
        pointer[12] = 0xc0;
        assert_eq!(answer(&pointer, &g).unwrap()[3] & 0x0f, FORMERR);
        let mut two = query("pypi.org", TYPE_A);
        two[5] = 2;
        assert_eq!(answer(&two, &g).unwrap()[3] & 0x0f, FORMERR);
        let mut status = query("pypi.org", TYPE_A);
        status[2] = 0x10;
        assert_eq!(answer(&status, &g).unwrap()[3] & 0x0f, NOTIMP);
    }

    proptest::proptest! {
        /// Whatever a tool sends to port 53, the stub answers with a
        /// well-formed header or not at all, and never panics.
        #[test]
        fn any_packet_gets_a_header_or_nothing(packet in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let g = gate(&["pypi.org"]);
            if let Some(r) = answer(&packet, &g) {
                proptest::prop_assert!(r.len() >= 12);
                proptest::prop_assert_eq!(&r[..2], &packet[..2]);
                proptest::prop_assert!(r[2] & 0x80 != 0, "a response");
            }
        }
    }
}
