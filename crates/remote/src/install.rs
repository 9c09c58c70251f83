//! This binary on the remote host: use the one installed already when its
//! content (SHA-256) is this binary's, or the one on the remote `$PATH` when
//! its version is ours, else copy this one into `<data>/bin/` (atomically,
//! under a name of its own: a running binary is never written over) when the
//! remote OS/arch match. An installed file whose content is not ours (someone
//! replaced it) is never run: it is installed again, and `up` says so.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{PlatformMismatch, RemoteError};
use crate::probe::Probe;
use crate::quote;
use crate::ssh::{Input, Ssh};

/// The local binary to install.
#[derive(Debug, Clone)]
pub struct LocalBinary {
    /// Its path.
    pub path: PathBuf,
    /// Its `--version` line, e.g. `toolsrv 0.1.0`.
    pub version: String,
    /// Its size in bytes.
    pub size: u64,
    /// The first 16 hex digits of its SHA-256.
    pub hash: String,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// SHA-256 of a file, hex.
pub fn file_sha256(p: &Path) -> Result<String, RemoteError> {
    let mut f = std::fs::File::open(p)
        .map_err(|e| RemoteError::io(format!("cannot open {}", p.display()), e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| RemoteError::io(format!("cannot read {}", p.display()), e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

impl LocalBinary {
    /// Describe `path` (normally `std::env::current_exe()`).
    pub fn new(path: PathBuf, version: String) -> Result<LocalBinary, RemoteError> {
        let size = std::fs::metadata(&path)
            .map_err(|e| RemoteError::io(format!("cannot stat {}", path.display()), e))?
            .len();
        let sha256 = file_sha256(&path)?;
        let hash = sha256[..16].to_string();
        Ok(LocalBinary {
            path,
            version,
            size,
            hash,
            sha256,
        })
    }

    /// Its name under `<data>/bin/`: `toolsrv-<version>-<hash>`.
    pub fn install_name(&self) -> String {
        let v: String = self
            .version
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || ".-+".contains(*c))
            .collect();
        format!("toolsrv-{v}-{}", self.hash)
    }
}

/// How the remote binary was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// This exact binary was installed before.
    AlreadyInstalled,
    /// `toolsrv` on the remote `$PATH` has our version.
    OnPath,
    /// Copied now.
    Installed,
    /// Copied again: the installed file's content was not this binary's (or
    /// the host could not hash it).
    Replaced,
}

/// The remote binary to run.
#[derive(Debug, Clone)]
pub struct RemoteBinary {
    /// Its remote path.
    pub path: String,
    /// Its version line.
    pub version: String,
    /// How it was found.
    pub how: How,
}

/// Find or install the binary; `host` is this machine's (platform, arch).
pub fn ensure(
    ssh: &Ssh,
    prelude: &str,
    probe: &Probe,
    local: &LocalBinary,
    host: (&str, &str),
) -> Result<RemoteBinary, RemoteError> {
    let name = local.install_name();
    let installed = format!("{}/bin/{name}", probe.data);
    if probe.installed && probe.installed_sha256.as_deref() == Some(local.sha256.as_str()) {
        return Ok(RemoteBinary {
            path: installed,
            version: local.version.clone(),
            how: How::AlreadyInstalled,
        });
    }
    if let Some((bin, version)) = &probe.path_bin {
        if version.trim() == local.version {
            return Ok(RemoteBinary {
                path: bin.clone(),
                version: version.trim().to_string(),
                how: How::OnPath,
            });
        }
    }
    if (probe.os.as_str(), probe.arch.as_str()) != host {
        return Err(RemoteError::OtherPlatform(Box::new(PlatformMismatch {
            address: ssh.address().to_string(),
            os: probe.os.clone(),
            arch: probe.arch.clone(),
            local_os: host.0.to_string(),
            local_arch: host.1.to_string(),
            version: local.version.to_string(),
            found: match &probe.path_bin {
                Some((b, v)) => format!(" ({b} says {v:?})"),
                None => String::new(),
            },
        })));
    }
    let script = format!(
        r#"{prelude}
set -e
d={dir}
mkdir -p "$d"
t="$d/.{name}.tmp.$$"
trap 'rm -f "$t"' EXIT
cat > "$t"
n=$(wc -c < "$t")
if [ $n -ne {size} ]; then echo "short transfer: $n of {size} bytes" >&2; exit 1; fi
if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$t")
elif command -v shasum >/dev/null 2>&1; then h=$(shasum -a 256 < "$t")
else h={sha256}; fi
if [ "${{h%% *}}" != {sha256} ]; then echo "the binary arrived altered: SHA-256 ${{h%% *}}, sent {sha256}" >&2; exit 1; fi
chmod 700 "$t"
"$t" --version > /dev/null
mv -f "$t" "$d/"{qname}
ln -s {qname} "$d/.toolsrv.lnk.$$"
mv -f "$d/.toolsrv.lnk.$$" "$d/toolsrv"
"#,
        dir = quote::sh(&format!("{}/bin", probe.data)),
        name = name,
        qname = quote::sh(&name),
        size = local.size,
        sha256 = quote::sh(&local.sha256),
    );
    ssh.run(&script, Input::File(&local.path))?;
    Ok(RemoteBinary {
        path: installed,
        version: local.version.clone(),
        how: if probe.installed {
            How::Replaced
        } else {
            How::Installed
        },
    })
}
