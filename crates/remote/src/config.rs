//! Content-addressed configuration transfer. The local configuration
//! directory's `sandbox.yaml`, `sandbox/` (profiles) and `tools/` are hashed;
//! the remote keeps every file it was sent under `<data>/objects/<sha256>`, so
//! only files whose content it does not hold cross the connection (an object
//! whose content no longer has its name's hash is sent again); the
//! server's configuration (`<data>/config/server-<hash>/`, read-only to its tools) is then updated in place
//! from the objects (changed files replaced atomically, removed ones deleted).

use std::path::{Path, PathBuf};

use crate::error::RemoteError;
use crate::install::file_sha256;
use crate::quote;
use crate::ssh::{Input, Ssh};

/// A shell function: `sha256 FILE` prints the file's SHA-256 (hex) with
/// `sha256sum` or `shasum -a 256`; on a host with neither it prints the
/// file's name (its content cannot be checked there, so it is trusted).
const SHA256_FN: &str = r#"sha256() {
  if command -v sha256sum >/dev/null 2>&1; then _h=$(sha256sum < "$1")
  elif command -v shasum >/dev/null 2>&1; then _h=$(shasum -a 256 < "$1")
  else _h=${1##*/}; fi
  echo "${_h%% *}"
}
"#;

/// One file to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path under the configuration directory, `/`-separated.
    pub rel: String,
    /// SHA-256, hex.
    pub hash: String,
    /// Whether it is executable (tool scripts).
    pub exec: bool,
    /// Its local path.
    pub local: PathBuf,
}

/// What a transfer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Files in the configuration.
    pub files: usize,
    /// Files whose content was sent (the others were on the remote already).
    pub sent: usize,
    /// Bytes sent.
    pub bytes: u64,
}

/// Which parts exist: the server picks the built-in policy or tools at
/// startup when a part is missing, so a change of layout needs a restart.
pub fn layout(entries: &[Entry]) -> String {
    let policy = entries.iter().any(|e| e.rel == "sandbox.yaml");
    let tools = entries.iter().any(|e| e.rel.starts_with("tools/"));
    format!(
        "policy={} tools={}",
        if policy { "sent" } else { "built-in" },
        if tools { "sent" } else { "built-in" }
    )
}

fn walk(root: &Path, rel: &str, out: &mut Vec<Entry>) -> Result<(), RemoteError> {
    let dir = root.join(rel);
    let rd = std::fs::read_dir(&dir)
        .map_err(|e| RemoteError::io(format!("cannot read {}", dir.display()), e))?;
    for ent in rd {
        let ent = ent.map_err(|e| RemoteError::io(format!("cannot read {}", dir.display()), e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else {
            return Err(RemoteError::NonUtf8Name(dir.to_path_buf()));
        };
        quote::text(name)?;
        let child = format!("{rel}/{name}");
        add(root, &child, out)?;
    }
    Ok(())
}

/// Add `rel` (a file, or a directory walked recursively; symlinks followed).
fn add(root: &Path, rel: &str, out: &mut Vec<Entry>) -> Result<(), RemoteError> {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join(rel);
    let Ok(m) = std::fs::metadata(&p) else {
        return Ok(()); // absent, or a dangling symlink: nothing to send
    };
    if m.is_dir() {
        walk(root, rel, out)
    } else if m.is_file() {
        out.push(Entry {
            rel: rel.to_string(),
            hash: file_sha256(&p)?,
            exec: m.permissions().mode() & 0o111 != 0,
            local: p,
        });
        Ok(())
    } else {
        Ok(())
    }
}

/// The files of configuration directory `dir`, sorted.
pub fn manifest(dir: &Path) -> Result<Vec<Entry>, RemoteError> {
    if !dir.is_dir() {
        return Err(RemoteError::NoConfigDir(dir.to_path_buf()));
    }
    let mut out = Vec::new();
    for part in ["sandbox.yaml", "sandbox", "tools"] {
        add(dir, part, &mut out)?;
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// Send what the remote lacks and update `config_dir`.
pub fn sync(
    ssh: &Ssh,
    prelude: &str,
    data: &str,
    config_dir: &str,
    entries: &[Entry],
) -> Result<SyncReport, RemoteError> {
    let objects = format!("{data}/objects");
    let mut report = SyncReport {
        files: entries.len(),
        ..SyncReport::default()
    };
    let mut hashes: Vec<&str> = entries.iter().map(|e| e.hash.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    // 1. Which objects are missing, or hold other content than their name
    //    says (replaced behind our back): those are sent (one round trip).
    let missing: Vec<String> = if hashes.is_empty() {
        Vec::new()
    } else {
        let script = format!(
            "{prelude}o={}\n{SHA256_FN}for h in {}; do [ -f \"$o/$h\" ] && [ \"$(sha256 \"$o/$h\")\" = \"$h\" ] || echo \"$h\"; done\n",
            quote::sh(&objects),
            hashes
                .iter()
                .map(|h| quote::sh(h))
                .collect::<Vec<_>>()
                .join(" ")
        );
        ssh.run(&script, Input::None)?
            .lines()
            .map(str::to_string)
            .collect()
    };
    // 2. Send each missing object once.
    for h in &missing {
        let Some(e) = entries.iter().find(|e| &e.hash == h) else {
            continue;
        };
        let script = format!(
            "{prelude}set -e\no={o}\nmkdir -p \"$o\"\nt=\"$o/.tmp.$$\"\ntrap 'rm -f \"$t\"' EXIT\ncat > \"$t\"\nmv -f \"$t\" \"$o/\"{h}\n",
            o = quote::sh(&objects),
            h = quote::sh(h),
        );
        ssh.run(&script, Input::File(&e.local))?;
        report.sent += 1;
        report.bytes += std::fs::metadata(&e.local).map(|m| m.len()).unwrap_or(0);
    }
    // 3. Update the server's configuration in place from the objects.
    let mut script = format!(
        r#"{prelude}set -e
o={o}
c={c}
mkdir -p "$c"
put() {{
  if ! cmp -s "$o/$1" "$c/$2" 2>/dev/null; then
    mkdir -p "$(dirname "$c/$2")"
    cp "$o/$1" "$c/$2.new.$$"
    chmod "$3" "$c/$2.new.$$"
    mv -f "$c/$2.new.$$" "$c/$2"
  fi
  chmod "$3" "$c/$2"
}}
"#,
        o = quote::sh(&objects),
        c = quote::sh(config_dir),
    );
    for e in entries {
        script.push_str(&format!(
            "put {} {} {}\n",
            quote::sh(&e.hash),
            quote::sh(&e.rel),
            if e.exec { "700" } else { "600" }
        ));
    }
    // Remove what is no longer in the configuration.
    script.push_str("find \"$c\" -type f | while IFS= read -r f; do\n  case \"$f\" in\n");
    let mut pats: Vec<String> = entries
        .iter()
        .map(|e| format!("\"$c\"/{}", quote::sh(&e.rel)))
        .collect();
    pats.push("\"$c\"/.never".into());
    script.push_str(&format!("    {}) ;;\n", pats.join("|")));
    script.push_str("    *) rm -f \"$f\" ;;\n  esac\ndone\n");
    script.push_str(
        "find \"$c\" -depth -mindepth 1 -type d -exec rmdir {} \\; 2>/dev/null || true\n",
    );
    ssh.run(&script, Input::None)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_holds_policy_profiles_and_tools_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        std::fs::create_dir_all(d.join("tools/sub")).expect("mkdir");
        std::fs::create_dir_all(d.join("sandbox")).expect("mkdir");
        std::fs::write(d.join("sandbox.yaml"), "x").expect("write");
        std::fs::write(d.join("sandbox/net.yaml"), "y").expect("write");
        std::fs::write(d.join("tools/a.yaml"), "a").expect("write");
        std::fs::write(d.join("tools/sub/b.yaml"), "a").expect("write");
        std::fs::write(d.join("other.txt"), "not sent").expect("write");
        let m = manifest(d).expect("manifest");
        let rels: Vec<&str> = m.iter().map(|e| e.rel.as_str()).collect();
        assert_eq!(
            rels,
            [
                "sandbox.yaml",
                "sandbox/net.yaml",
                "tools/a.yaml",
                "tools/sub/b.yaml"
            ]
        );
        assert_eq!(m[2].hash, m[3].hash, "same content, same object");
        assert_eq!(layout(&m), "policy=sent tools=sent");
        assert_eq!(layout(&[]), "policy=built-in tools=built-in");
        assert!(manifest(&d.join("nope")).is_err());
    }
}
