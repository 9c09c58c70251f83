//! Writing the log: one `write(2)` per record on a file opened for
//! appending (mode `0600`), so records of concurrent writers never
//! interleave within a line; a failed write is logged and never stops a
//! run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::chain::{line_hash, GENESIS};

/// Why the log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file cannot be opened or read.
    #[error("audit log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its last line is not a record: the chain cannot go on from it.
    #[error("audit log {path}: its last line is not a record ({why}); check it with `toolsrv audit verify {path}` and move the file aside to start a new one")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The log, open for appending.
pub struct AuditLog {
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    file: File,
    next: u64,
    prev: String,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditLog({})", self.path.display())
    }
}

/// How much of the file's end is read to find its last record.
const TAIL: u64 = 1 << 20;

impl AuditLog {
    /// Opens (or makes, `0600`) `path` for appending; the next record goes
    /// on from its last one.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(io)?;
        let (next, prev) = last_record(&mut file)
            .map_err(io)?
            .map(|line| {
                let v: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
                let seq = v
                    .get("seq")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| "it has no seq".to_string())?;
                Ok::<_, String>((seq + 1, line_hash(&line)))
            })
            .transpose()
            .map_err(|why| AuditError::Damaged {
                path: path.to_path_buf(),
                why,
            })?
            .unwrap_or((1, GENESIS.to_string()));
        Ok(AuditLog {
            path: path.to_path_buf(),
            state: Mutex::new(State { file, next, prev }),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a record of `event` with `fields` (and `seq`, `prev`,
    /// `time`); a failed write is logged, not returned.
    pub fn append(&self, event: &str, fields: Map<String, Value>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut record = Map::new();
        record.insert("seq".into(), st.next.into());
        record.insert("prev".into(), st.prev.clone().into());
        record.insert(
            "time".into(),
            toolsrv_protocol::format_rfc3339_millis(std::time::SystemTime::now()).into(),
        );
        record.insert("event".into(), event.into());
        for (k, v) in fields {
            record.entry(k).or_insert(v);
        }
        let line = Value::Object(record).to_string();
        let mut bytes = line.clone().into_bytes();
        bytes.push(b'\n');
        match st.file.write_all(&bytes) {
            Ok(()) => {
                st.next += 1;
                st.prev = line_hash(&line);
            }
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, event, "cannot write to the audit log");
            }
        }
    }
}

/// The file's last non-empty line, if it has one.
fn last_record(file: &mut File) -> std::io::Result<Option<String>> {
    let len = file.seek(SeekFrom::End(0))?;
    let from = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = String::new();
    file.read_to_string(&mut tail)?;
    Ok(tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_chain_across_reopenings_and_the_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("audit.log");
        let log = AuditLog::open(&p).unwrap();
        log.append("run_start", Map::new());
        log.append("run_end", Map::new());
        drop(log);
        let log = AuditLog::open(&p).unwrap();
        log.append("run_start", Map::new());
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(crate::verify(&text), Ok(3));
        assert!(
            text.lines().nth(2).unwrap().contains(r#""seq":3"#),
            "{text}"
        );
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&p, format!("{text}garbage\n")).unwrap();
        let e = AuditLog::open(&p).unwrap_err().to_string();
        assert!(e.contains("its last line is not a record"), "{e}");
    }
}
