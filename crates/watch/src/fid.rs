//! Decoding what `read(2)` of a fanotify group in FID mode returns: events
//! (`struct fanotify_event_metadata`) each followed by information records
//! (`struct fanotify_event_info_fid`: a filesystem id, a file handle and,
//! for `FAN_EVENT_INFO_TYPE_DFID_NAME`, the entry's name). Pure functions
//! over bytes; no system call.

use crate::sys::fan;

/// Size of `struct fanotify_event_metadata`.
pub(crate) const METADATA_LEN: usize = 24;

/// A file handle as fanotify reports it: the filesystem (`f_fsid`), the
/// handle's type and bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Fid {
    pub(crate) fsid: [i32; 2],
    pub(crate) handle_type: i32,
    pub(crate) handle: Vec<u8>,
}

/// One event, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEvent {
    /// The event's mask (`FAN_CREATE | FAN_ONDIR`, ...).
    pub(crate) mask: u64,
    /// The pid as the reading task's namespace sees it (0: not visible there).
    pub(crate) pid: i32,
    /// The directory and the name of the entry (`FAN_EVENT_INFO_TYPE_DFID_NAME`,
    /// or the new side of a rename).
    pub(crate) dir: Option<(Fid, Vec<u8>)>,
    /// The object itself (`FAN_EVENT_INFO_TYPE_FID`), when reported.
    pub(crate) object: Option<Fid>,
}

/// Why a buffer did not decode (a kernel that speaks another version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("a fanotify event of {0} bytes does not fit")]
    Length(usize),
    #[error("fanotify metadata version {0} (this code reads version 3)")]
    Version(u8),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    u32_at(b, at) as i32
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// The length of the event at the start of `buf` and its pid, mask and fd,
/// without its records (what the reader needs to filter). `None` when `buf`
/// does not start with a whole event.
pub(crate) fn header(buf: &[u8]) -> Option<(usize, u64, i32, i32)> {
    if buf.len() < METADATA_LEN {
        return None;
    }
    let len = u32_at(buf, 0) as usize;
    if len < METADATA_LEN || len > buf.len() {
        return None;
    }
    Some((len, u64_at(buf, 8), i32_at(buf, 16), i32_at(buf, 20)))
}

/// Every event in `buf` (what one `read` returned, or several concatenated).
pub(crate) fn decode(buf: &[u8]) -> Result<Vec<RawEvent>, DecodeError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let rest = &buf[at..];
        let Some((len, mask, fd, pid)) = header(rest) else {
            return Err(DecodeError::Length(rest.len()));
        };
        let _ = fd;
        let vers = rest[4];
        if vers != fan::METADATA_VERSION {
            return Err(DecodeError::Version(vers));
        }
        let meta_len = usize::from(u16_at(rest, 6)).max(METADATA_LEN).min(len);
        let mut ev = RawEvent {
            mask,
            pid,
            dir: None,
            object: None,
        };
        records(&rest[meta_len..len], &mut ev);
        out.push(ev);
        at += len;
    }
    Ok(out)
}

/// Reads the information records of one event into `ev`; records of other
/// types (pidfd, error, range) and malformed ones are skipped.
fn records(mut b: &[u8], ev: &mut RawEvent) {
    while b.len() >= 4 {
        let kind = b[0];
        let len = usize::from(u16_at(b, 2));
        if len < 4 || len > b.len() {
            return;
        }
        let rec = &b[..len];
        match kind {
            fan::INFO_TYPE_FID => ev.object = fid(rec).map(|(f, _)| f),
            fan::INFO_TYPE_DFID if ev.dir.is_none() => {
                ev.dir = fid(rec).map(|(f, _)| (f, Vec::new()));
            }
            fan::INFO_TYPE_DFID_NAME | fan::INFO_TYPE_NEW_DFID_NAME => {
                ev.dir = fid(rec).map(|(f, name)| (f, name.to_vec()));
            }
            fan::INFO_TYPE_OLD_DFID_NAME if ev.dir.is_none() => {
                ev.dir = fid(rec).map(|(f, name)| (f, name.to_vec()));
            }
            _ => {}
        }
        b = &b[len..];
    }
}

/// A FID record: header (4), fsid (8), `struct file_handle` (8 + bytes),
/// then a NUL-terminated name for the `*_NAME` types (empty otherwise).
fn fid(rec: &[u8]) -> Option<(Fid, &[u8])> {
    const HANDLE_AT: usize = 12;
    if rec.len() < HANDLE_AT + 8 {
        return None;
    }
    let fsid = [i32_at(rec, 4), i32_at(rec, 8)];
    let bytes = u32_at(rec, HANDLE_AT) as usize;
    let handle_type = i32_at(rec, HANDLE_AT + 4);
    let start = HANDLE_AT + 8;
    let end = start.checked_add(bytes)?;
    if end > rec.len() {
        return None;
    }
    let tail = &rec[end..];
    let name = &tail[..tail.iter().position(|&c| c == 0).unwrap_or(tail.len())];
    Some((
        Fid {
            fsid,
            handle_type,
            handle: rec[start..end].to_vec(),
        },
        name,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event as the kernel lays it out: metadata, then the records.
    fn event(mask: u64, pid: i32, records: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = records.concat();
        let len = METADATA_LEN + body.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u32).to_ne_bytes());
        v.push(fan::METADATA_VERSION);
        v.push(0);
        v.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        v.extend_from_slice(&mask.to_ne_bytes());
        v.extend_from_slice(&fan::NOFD.to_ne_bytes());
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend_from_slice(&body);
        v
    }

    fn record(kind: u8, fsid: [i32; 2], handle: &[u8], name: Option<&str>) -> Vec<u8> {
        let mut v = vec![kind, 0, 0, 0];
        v.extend_from_slice(&fsid[0].to_ne_bytes());
        v.extend_from_slice(&fsid[1].to_ne_bytes());
        v.extend_from_slice(&(handle.len() as u32).to_ne_bytes());
        v.extend_from_slice(&1i32.to_ne_bytes());
        v.extend_from_slice(handle);
        if let Some(n) = name {
            v.extend_from_slice(n.as_bytes());
            v.push(0);
        }
        while v.len() % 4 != 0 {
            v.push(0);
        }
        let len = v.len() as u16;
        v[2..4].copy_from_slice(&len.to_ne_bytes());
        v
    }

    #[test]
    fn an_event_with_a_dir_record_and_an_object_record_decodes() {
        let buf = event(
            fan::CREATE | fan::ONDIR,
            7,
            &[
                record(fan::INFO_TYPE_DFID_NAME, [1, 2], &[9; 8], Some(".git")),
                record(fan::INFO_TYPE_FID, [1, 2], &[5; 8], None),
            ],
        );
        let evs = decode(&buf).expect("decodes");
        assert_eq!(evs.len(), 1);
        let e = &evs[0];
        assert_eq!(e.mask, fan::CREATE | fan::ONDIR);
        assert_eq!(e.pid, 7);
        let (dir, name) = e.dir.as_ref().expect("dir");
        assert_eq!(dir.fsid, [1, 2]);
        assert_eq!(dir.handle, vec![9; 8]);
        assert_eq!(name, b".git");
        assert_eq!(e.object.as_ref().expect("object").handle, vec![5; 8]);
    }

    #[test]
    fn several_events_in_one_buffer_decode_in_order() {
        let mut buf = event(fan::CREATE, 0, &[record(2, [0, 0], &[1; 8], Some("a"))]);
        buf.extend(event(
            fan::MOVED_TO,
            3,
            &[record(2, [0, 0], &[1; 8], Some("b"))],
        ));
        buf.extend(event(fan::Q_OVERFLOW, 0, &[]));
        let evs = decode(&buf).expect("decodes");
        let names: Vec<_> = evs
            .iter()
            .map(|e| e.dir.as_ref().map(|d| d.1.clone()))
            .collect();
        assert_eq!(names, vec![Some(b"a".to_vec()), Some(b"b".to_vec()), None]);
        assert_eq!(evs[2].mask, fan::Q_OVERFLOW);
    }

    #[test]
    fn truncated_or_foreign_buffers_are_errors_not_panics() {
        let buf = event(fan::CREATE, 1, &[record(2, [0, 0], &[1; 8], Some("a"))]);
        for cut in 1..buf.len() {
            let _ = decode(&buf[..cut]);
        }
        assert!(decode(&buf[..10]).is_err());
        let mut v2 = buf.clone();
        v2[4] = 2;
        assert_eq!(decode(&v2), Err(DecodeError::Version(2)));
        // A record announcing more than the event holds is skipped.
        let mut bad = buf.clone();
        bad[METADATA_LEN + 2] = 0xff;
        let evs = decode(&bad).expect("decodes");
        assert!(evs[0].dir.is_none());
    }
}
