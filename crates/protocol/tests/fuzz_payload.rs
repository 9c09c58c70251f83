//! A bounded, deterministic fuzz test of `parse_payload` that runs under plain `cargo test`:
//! xorshift mutations of a seed corpus for 100 000 iterations or 3 seconds, whichever comes
//! first. The parser must never panic, errors must stay short, and every accepted payload must
//! survive an encode/parse round trip and argument conversion.

use std::time::{Duration, Instant};

use toolsrv_protocol::{convert_args, parse_payload, validate_agent_id, validate_tool_name};

const ITERATIONS: usize = 100_000;
const TIME_LIMIT: Duration = Duration::from_secs(3);

const SEEDS: &[&[u8]] = &[
    b"token=abc\ntool=shell\nagent=a1\ncommand=echo hi\n",
    b"tool=file_read\nagent=a1\nsession=s1\npath=/etc/hosts\noffset=10\nlimit=2.5\n",
    b"tool=t\r\nagent=a\r\nenv.PATH=/bin\r\nenv.X_1=\\n\\\\\r\nbypass=true\r\ntimeout=1h30m\r\n",
    b"tool=t\nagent=a\ncwd=/tmp\nsandbox=strict\ntimeout=500ms\nall=false\nnames=[\"a\"]\nopts={}\n",
    b"tool=t\nagent=a\nx=a=b\\\n\n\ny=\\q\\",
    b"tool=t\nagent=a\ntimeout=90\nbypass=false\n",
    b"=bad\n",
    b"tool=t\ntool=t\nagent=a\n",
];

/// Bytes that steer mutations towards the parser's decision points.
const INTERESTING: &[u8] = b"=\n\r\\n.e_-:@ \xff\xc3\xa9\x00";

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        // The modulo result is below `n`, which is a usize.
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, input: &mut Vec<u8>) {
    let len = input.len();
    match rng.below(7) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(len + 1);
            input.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
        }
        2 if len > 0 => {
            input.remove(rng.below(len));
        }
        3 if len > 0 => {
            let start = rng.below(len);
            let end = start + rng.below(len - start + 1).min(32);
            let chunk = input[start..end].to_vec();
            let at = rng.below(input.len() + 1);
            input.splice(at..at, chunk);
        }
        4 => {
            let other = SEEDS[rng.below(SEEDS.len())];
            let from = rng.below(other.len() + 1);
            let at = rng.below(len + 1);
            input.splice(at..at, other[from..].iter().copied());
        }
        5 if len > 0 => input.truncate(rng.below(len)),
        _ => {
            let i = rng.below(len + 1);
            input.insert(i, (rng.next() & 0xff) as u8);
        }
    }
}

#[test]
fn parse_payload_survives_mutation() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "offset": {"type": "integer"},
            "limit": {"type": "number"},
            "all": {"type": "boolean"},
            "names": {"type": "array"},
            "opts": {"type": "object"}
        },
        "required": ["command"]
    });
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let started = Instant::now();
    let (mut accepted, mut rejected, mut iterations) = (0usize, 0usize, 0usize);
    while iterations < ITERATIONS && started.elapsed() < TIME_LIMIT {
        iterations += 1;
        let mut input = SEEDS[rng.below(SEEDS.len())].to_vec();
        for _ in 0..=rng.below(6) {
            mutate(&mut rng, &mut input);
        }
        match parse_payload(&input) {
            Ok(p) => {
                accepted += 1;
                assert_eq!(validate_tool_name(&p.tool), Ok(()), "{input:?}");
                assert_eq!(validate_agent_id(&p.agent), Ok(()), "{input:?}");
                let again = parse_payload(p.encode().as_bytes());
                assert_eq!(again.as_ref().ok(), Some(&p), "{input:?}");
                if let Err(e) = convert_args(&p.args, &schema) {
                    assert!(!e.to_string().is_empty());
                }
            }
            Err(e) => {
                rejected += 1;
                let message = e.to_string();
                assert!(!message.is_empty());
                // Quoted input is capped at 80 bytes (plus escaping) so errors stay short.
                assert!(message.len() < 600, "{} bytes: {message}", message.len());
            }
        }
    }
    eprintln!("fuzz_payload: {iterations} iterations, {accepted} accepted, {rejected} rejected");
    assert!(
        accepted > 100,
        "only {accepted} of {iterations} inputs parsed"
    );
    assert!(
        rejected > 100,
        "only {rejected} of {iterations} inputs were rejected"
    );
}
