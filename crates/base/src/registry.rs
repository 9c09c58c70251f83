//! The per-user registry of live toolsrv processes: `<user dir>/servers/`,
//! one file per process, so that every server can hide from its tools what
//! the others keep (their sockets, secrets and token files) and can tell a
//! run of any server from the human.
//!
//! A file is named `<kind>-<pid>-<start>` ([`Kind`], [`ProcessId`]): the
//! name alone says which processes are servers, so a check at every
//! `accept` reads the directory and nothing else. Its content is one path a
//! line, `socket <path>` (a socket whose siblings `<socket>.secret` and
//! `<socket>.mcp-token` are hidden with it) or `hide <path>`. A path holding
//! a newline is left out (its own server still hides it).
//!
//! A process registers when it starts and removes its file when it stops;
//! the file of a process that is gone (killed) is ignored by readers and
//! removed by the next server that starts ([`clean`]). The directory lies in
//! the per-user directory, which every server hides from its tools: a tool
//! can neither add, change nor remove an entry.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::process::ProcessId;
use crate::Sibling;

/// The registry's directory in a per-user directory.
pub fn dir(user_dir: &Path) -> PathBuf {
    user_dir.join("servers")
}

/// What registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A `toolsrv serve`: its runs are tools.
    Server,
    /// A `toolsrv mcp` bridge: a client, whose files are hidden too.
    Bridge,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Bridge => "bridge",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            "server" => Some(Kind::Server),
            "bridge" => Some(Kind::Bridge),
            _ => None,
        }
    }
}

/// One registered process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Server or bridge.
    pub kind: Kind,
    /// The process.
    pub id: ProcessId,
    /// Its sockets (absolute).
    pub sockets: Vec<PathBuf>,
    /// Other files it keeps from tools (absolute).
    pub hidden: Vec<PathBuf>,
}

impl Entry {
    /// Every path to hide for this entry: each socket and its siblings
    /// ([`Sibling::HIDDEN_WITH_SOCKET`]), then the other files.
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for s in &self.sockets {
            out.push(s.clone());
            out.extend(Sibling::HIDDEN_WITH_SOCKET.iter().map(|k| k.of(s)));
        }
        out.extend(self.hidden.iter().cloned());
        out
    }

    fn file_name(&self) -> String {
        format!("{}-{}", self.kind.name(), self.id)
    }

    fn text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let lines = self
            .sockets
            .iter()
            .map(|p| ("socket ", p))
            .chain(self.hidden.iter().map(|p| ("hide ", p)));
        for (key, p) in lines {
            let bytes = p.as_os_str().as_bytes();
            if !p.is_absolute() || bytes.contains(&b'\n') {
                continue;
            }
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(bytes);
            out.push(b'\n');
        }
        out
    }
}

/// The kind and process a registry file name stands for.
fn parse_name(name: &str) -> Option<(Kind, ProcessId)> {
    let (kind, id) = name.split_once('-')?;
    Some((Kind::parse(kind)?, ProcessId::parse(id)?))
}

/// An entry's file content read back.
fn parse_text(kind: Kind, id: ProcessId, text: &[u8]) -> Entry {
    let mut e = Entry {
        kind,
        id,
        sockets: Vec::new(),
        hidden: Vec::new(),
    };
    for line in text.split(|b| *b == b'\n') {
        let path = |rest: &[u8]| PathBuf::from(OsStr::from_bytes(rest));
        if let Some(rest) = line.strip_prefix(b"socket ") {
            e.sockets.push(path(rest));
        } else if let Some(rest) = line.strip_prefix(b"hide ") {
            e.hidden.push(path(rest));
        }
    }
    e.sockets.retain(|p| p.is_absolute());
    e.hidden.retain(|p| p.is_absolute());
    e
}

/// A registration: the entry's file, removed by [`Registration::remove`] or
/// when dropped.
#[derive(Debug)]
pub struct Registration {
    path: Option<PathBuf>,
}

impl Registration {
    /// The entry's file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Removes the entry now.
    pub fn remove(mut self) {
        self.remove_file();
    }

    fn remove_file(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.remove_file();
    }
}

/// Registers `entry` in the registry `dir` (created private, see
/// [`crate::userdir::ensure_private_dir`]): written to a temporary name and
/// renamed, so a reader never sees half an entry. The error names the file.
pub fn register(dir: &Path, entry: &Entry) -> io::Result<Registration> {
    crate::userdir::ensure_private_dir(dir)?;
    let path = dir.join(entry.file_name());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{}.{nanos}.tmp", entry.file_name()));
    let named = |what: &str, p: &Path, e: io::Error| {
        io::Error::new(e.kind(), format!("cannot {what} {}: {e}", p.display()))
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&entry.text()))
        .map_err(|e| named("write", &tmp, e));
    let renamed = written.and_then(|()| {
        std::fs::rename(&tmp, &path).map_err(|e| named("rename into place", &path, e))
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed.map(|()| Registration { path: Some(path) })
}

/// The live servers in `dir`, from the file names alone (no file is read);
/// an error when they cannot be told (the directory or `/proc` cannot be
/// read for another reason than absence: out of descriptors, say).
pub fn live_servers(dir: &Path) -> io::Result<Vec<ProcessId>> {
    let mut out = Vec::new();
    for (kind, id) in names(dir)? {
        if kind == Kind::Server && id.status()? {
            out.push(id);
        }
    }
    Ok(out)
}

/// The live entries of `dir`, files read. A missing directory has none; an
/// error when they cannot be told (as [`live_servers`]): a reader that
/// compares sets must not take a failed read for a change.
pub fn read_live(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for (kind, id) in names(dir)? {
        if !id.status()? {
            continue;
        }
        let file = dir.join(format!("{}-{id}", kind.name()));
        match read_small(&file) {
            Ok(text) => out.push(parse_text(kind, id, &text)),
            // Removed since the directory was read: its process stopped.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by_key(|e| (e.id, e.kind.name()));
    Ok(out)
}

/// [`read_live`], with what cannot be read taken as no entry.
pub fn live_entries(dir: &Path) -> Vec<Entry> {
    read_live(dir).unwrap_or_default()
}

/// Removes the entries of processes that are gone (and temporary files left
/// by a writer that died); returns the removed entries.
pub fn clean(dir: &Path) -> Vec<Entry> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') && name.ends_with(".tmp") {
            let writer = name[1..]
                .split('.')
                .next()
                .and_then(parse_name)
                .map(|(_, id)| id);
            if writer.is_some_and(|id| !id.alive()) {
                let _ = std::fs::remove_file(e.path());
            }
            continue;
        }
        let Some((kind, id)) = parse_name(name) else {
            continue;
        };
        if id.alive() {
            continue;
        }
        let text = read_small(&e.path()).unwrap_or_default();
        if std::fs::remove_file(e.path()).is_ok() {
            removed.push(parse_text(kind, id, &text));
        }
    }
    removed
}

/// The (kind, process) of every entry file in `dir` (none when it does not
/// exist).
fn names(dir: &Path) -> io::Result<Vec<(Kind, ProcessId)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in rd {
        if let Some(n) = e?.file_name().to_str().and_then(parse_name) {
            out.push(n);
        }
    }
    Ok(out)
}

/// An entry file's bytes (at most 1 MiB: entries are a few paths).
fn read_small(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)?
        .take(1 << 20)
        .read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::env::temp_dir().join(format!(
            "toolsrv-registry-{name}-{}-{nanos}",
            std::process::id()
        ))
    }

    #[test]
    fn an_entry_reads_back_and_is_removed_with_its_registration() {
        let dir = tmp("roundtrip");
        let me = ProcessId::current().unwrap();
        let entry = Entry {
            kind: Kind::Server,
            id: me,
            sockets: vec![PathBuf::from("/p/.run/a.sock")],
            hidden: vec![
                PathBuf::from("/p/pinned"),
                PathBuf::from("/p/bad\nname"),
                PathBuf::from("relative"),
            ],
        };
        let reg = register(&dir, &entry).expect("register");
        let got = live_entries(&dir);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].sockets, entry.sockets);
        assert_eq!(got[0].hidden, vec![PathBuf::from("/p/pinned")]);
        assert_eq!(
            got[0].hidden_paths(),
            vec![
                PathBuf::from("/p/.run/a.sock"),
                PathBuf::from("/p/.run/a.sock.secret"),
                PathBuf::from("/p/.run/a.sock.mcp-token"),
                PathBuf::from("/p/pinned"),
            ]
        );
        assert_eq!(live_servers(&dir).unwrap(), vec![me]);
        reg.remove();
        assert!(live_entries(&dir).is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn entries_of_processes_that_are_gone_are_ignored_and_cleaned() {
        let dir = tmp("dead");
        let me = ProcessId::current().unwrap();
        let dead = ProcessId {
            start: me.start + 1,
            ..me
        };
        let entry = |kind, id| Entry {
            kind,
            id,
            sockets: vec![PathBuf::from("/x.sock")],
            hidden: Vec::new(),
        };
        let _alive = register(&dir, &entry(Kind::Bridge, me)).unwrap();
        std::mem::forget(register(&dir, &entry(Kind::Server, dead)).unwrap());
        std::fs::write(dir.join(format!(".server-{dead}.1.tmp")), "").unwrap();
        std::fs::write(dir.join("unrelated"), "").unwrap();
        assert!(
            live_servers(&dir).unwrap().is_empty(),
            "a bridge is no server"
        );
        assert!(live_servers(&dir.join("missing")).unwrap().is_empty());
        assert_eq!(live_entries(&dir).len(), 1);
        let removed = clean(&dir);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].id, dead);
        assert_eq!(removed[0].sockets, vec![PathBuf::from("/x.sock")]);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, vec![format!("bridge-{me}"), "unrelated".to_string()]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
