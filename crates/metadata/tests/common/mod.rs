//! Helpers shared by the integration tests: real files in temp dirs.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Map, Value};
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

use toolsrv_metadata::{ArgFile, Catalog, Host, Invocation};

/// Writes `text` to `dir/name` with `mode`.
pub fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).expect("write tool file");
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

/// Writes an executable (0755) file.
pub fn exe(dir: &Path, name: &str, text: &str) -> PathBuf {
    write(dir, name, text, 0o755)
}

/// Writes a plain (0644) file.
pub fn plain(dir: &Path, name: &str, text: &str) -> PathBuf {
    write(dir, name, text, 0o644)
}

/// A linux/amd64 catalog of `dir`.
pub fn linux(dir: &Path) -> Catalog {
    Catalog::new(dir.to_path_buf(), Host::new("linux", "amd64"))
}

/// The object of a `json!` literal.
pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("test literal is not an object: {other}"),
    }
}

/// Spawns the invocation in `cwd` with a clean environment plus its env
/// and PATH, and waits for it.
///
/// A spawn refused with `ETXTBSY` is tried again (at most 100 times): the
/// tests run in parallel threads, and a script another test has just
/// written can be held open for writing for a moment by a child of a third
/// test forked before its `execve` closed that descriptor.
///
/// The `file: true` arguments are passed as the server passes them: each
/// value in a file open as the child's descriptor [`ArgFile::fd`].
pub fn run(inv: &Invocation, cwd: &Path) -> Output {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.argv[1..])
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(inv.env.iter().map(|(k, v)| (k, v)));
    let files: Vec<(i32, fs::File)> = inv
        .files
        .iter()
        .map(|f: &ArgFile| {
            let mut file = tempfile::tempfile().expect("temp file");
            file.write_all(f.value.as_bytes()).expect("write the value");
            file.seek(SeekFrom::Start(0)).expect("rewind");
            (f.fd, file)
        })
        .collect();
    let pairs: Vec<(i32, i32)> = files.iter().map(|(to, f)| (*to, f.as_raw_fd())).collect();
    // Safety: only fcntl and dup2 between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // First above every target, so no dup2 closes a source not yet moved.
            let high: Vec<(i32, i32)> = pairs
                .iter()
                .map(|&(to, from)| (to, libc::fcntl(from, libc::F_DUPFD, 100)))
                .collect();
            for (to, from) in high {
                if from < 0 || libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut attempts = 0;
    loop {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempts < 100 => {
                attempts += 1;
                std::thread::yield_now();
            }
            r => return r.expect("spawn tool"),
        }
    }
}

/// stdout + stderr as text.
pub fn text(out: &Output) -> String {
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}
