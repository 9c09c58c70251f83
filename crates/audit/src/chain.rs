//! The chain: each record's `prev` is the SHA-256 of the line before it,
//! as written, and its `seq` one more than that record's.

use sha2::{Digest, Sha256};

/// The `prev` of the first record of a new file.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The SHA-256 (lower-case hex) of `line` as written, without its newline.
pub fn line_hash(line: &str) -> String {
    hex::encode(Sha256::digest(line.as_bytes()))
}

/// Where a file's chain breaks: the first record that is not what the one
/// before it says must follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {line} (seq {seq}): {why}")]
pub struct Broken {
    /// The line number (1-based).
    pub line: usize,
    /// The `seq` expected there (the first bad one).
    pub seq: u64,
    /// What is wrong.
    pub why: String,
}

/// Checks every record of `text`: each line a JSON object whose `seq`
/// follows the one before and whose `prev` is the hash of the line before
/// (the first: `seq` as it says and `prev` all zeros when it is 1). The
/// number of records, or the first bad one.
pub fn verify(text: &str) -> Result<u64, Broken> {
    let mut prev_line: Option<&str> = None;
    let mut expected: Option<u64> = None;
    let mut count = 0u64;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let want = expected.unwrap_or(1);
        let broken = |why: String| Broken {
            line: n,
            seq: want,
            why,
        };
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| broken(format!("not a JSON record: {e}")))?;
        let seq = v
            .get("seq")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| broken("no seq".to_string()))?;
        let prev = v
            .get("prev")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| broken("no prev".to_string()))?;
        match prev_line {
            None => {
                // The file's first record: a new file starts at 1 from the
                // genesis; nothing before it is there to check otherwise.
                if seq == 1 && prev != GENESIS {
                    return Err(broken(format!(
                        "the first record's prev is {prev}, not {GENESIS}"
                    )));
                }
                if seq != 1 {
                    return Err(broken(format!(
                        "the file starts at seq {seq}: the records before it are gone"
                    )));
                }
            }
            Some(before) => {
                if seq != want {
                    return Err(broken(format!(
                        "seq is {seq}: a record was removed, inserted or moved"
                    )));
                }
                let h = line_hash(before);
                if prev != h {
                    // The numbers run on, so no record is missing here: the
                    // one before was edited (or this one's prev was).
                    return Err(Broken {
                        line: n - 1,
                        seq: want - 1,
                        why: format!(
                            "it was edited: it hashes to {h}, but the record after it (seq {want}) says {prev}"
                        ),
                    });
                }
            }
        }
        prev_line = Some(line);
        expected = Some(seq + 1);
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(events: &[&str]) -> Vec<String> {
        let mut prev = GENESIS.to_string();
        let mut out = Vec::new();
        for (i, e) in events.iter().enumerate() {
            let line = format!(r#"{{"seq":{},"prev":"{prev}","event":"{e}"}}"#, i + 1);
            prev = line_hash(&line);
            out.push(line);
        }
        out
    }

    #[test]
    fn a_whole_chain_holds_and_every_tampering_names_the_first_bad_seq() {
        let lines = chain(&["run_start", "run_end", "approval", "run_start"]);
        assert_eq!(verify(&(lines.join("\n") + "\n")), Ok(4));
        assert_eq!(verify(""), Ok(0));
        let edited = lines.join("\n").replace("run_end", "run_ended");
        assert_eq!(verify(&edited).unwrap_err().seq, 2);
        let last_edited = lines
            .join("\n")
            .replace(r#""event":"run_start"}"#, r#""event":"x"}"#);
        assert_eq!(verify(&last_edited).unwrap_err().seq, 1, "the first of two");
        let mut removed = lines.clone();
        removed.remove(1);
        assert_eq!(verify(&removed.join("\n")).unwrap_err().seq, 2);
        let mut reordered = lines.clone();
        reordered.swap(1, 2);
        assert_eq!(verify(&reordered.join("\n")).unwrap_err().seq, 2);
        let mut inserted = lines.clone();
        inserted.insert(2, lines[1].clone());
        assert_eq!(verify(&inserted.join("\n")).unwrap_err().seq, 3);
        let first_gone = lines[1..].join("\n");
        assert_eq!(verify(&first_gone).unwrap_err().seq, 1);
        let garbage = format!("{}\nnot json\n", lines[0]);
        let e = verify(&garbage).unwrap_err();
        assert_eq!((e.line, e.seq), (2, 2));
    }
}
