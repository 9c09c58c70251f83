//! What the remote host is: OS and architecture (Go's names, as `info`
//! says), its directories, and which toolsrv it already has.

use toolsrv_metadata::{go_arch, go_os};

use crate::error::RemoteError;
use crate::quote;
use crate::ssh::{Input, Ssh};

/// The remote host, as the probe script saw it.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// `GOOS` name (`linux`, `darwin`, ...).
    pub os: String,
    /// `GOARCH` name (`amd64`, `arm64`, ...).
    pub arch: String,
    /// `$HOME`.
    pub home: String,
    /// toolsrv's data directory: `${XDG_DATA_HOME:-$HOME/.local/share}/toolsrv`.
    pub data: String,
    /// The remote state directory (the default socket and the server's state
    /// directories): `$XDG_RUNTIME_DIR/toolsrv/remote`, else
    /// `${XDG_STATE_HOME:-$HOME/.local/state}/toolsrv/remote`; never under
    /// `/tmp`. The sandbox hides it from every tool (`TOOLSRV_STATE`).
    pub runtime: String,
    /// `toolsrv` on the remote `$PATH`, and what its `--version` says.
    pub path_bin: Option<(String, String)>,
    /// Whether this exact binary is installed already (`<data>/bin/<name>`).
    pub installed: bool,
    /// The SHA-256 of the installed file, hex, when it is installed and the
    /// host has `sha256sum` or `shasum` (its name alone proves nothing: the
    /// file may have been replaced since).
    pub installed_sha256: Option<String>,
}

/// The lines every remote script starts with: a private umask and the
/// `--env` variables (names checked, values quoted).
pub fn prelude(env: &[(String, String)]) -> Result<String, RemoteError> {
    let mut s = String::from("umask 077\n");
    for (k, v) in env {
        let ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(RemoteError::BadEnvName(k.to_string()));
        }
        s.push_str(&format!("{k}={}; export {k}\n", quote::sh(quote::text(v)?)));
    }
    Ok(s)
}

/// Run the probe; `bin_name` is this binary's install name.
pub fn probe(ssh: &Ssh, prelude: &str, bin_name: &str) -> Result<Probe, RemoteError> {
    let script = format!(
        r#"{prelude}
: "${{HOME:?HOME is not set}}"
echo "os=$(uname -s)"
echo "arch=$(uname -m)"
echo "home=$HOME"
case "${{XDG_DATA_HOME:-}}" in /*) data="$XDG_DATA_HOME/toolsrv" ;; *) data="$HOME/.local/share/toolsrv" ;; esac
echo "data=$data"
case "${{XDG_RUNTIME_DIR:-}}" in
  /*) if [ -d "$XDG_RUNTIME_DIR" ]; then echo "runtime=$XDG_RUNTIME_DIR/toolsrv/remote"; fi ;;
esac
case "${{XDG_STATE_HOME:-}}" in
  /*) echo "state=$XDG_STATE_HOME/toolsrv/remote" ;;
  *) echo "state=$HOME/.local/state/toolsrv/remote" ;;
esac
if command -v toolsrv >/dev/null 2>&1; then
  echo "path_bin=$(command -v toolsrv)"
  echo "path_version=$(toolsrv --version 2>/dev/null | head -n 1)"
fi
b="$data/bin/"{name}
if [ -f "$b" ] && [ -x "$b" ]; then
  echo "installed=yes"
  if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$b")
  elif command -v shasum >/dev/null 2>&1; then h=$(shasum -a 256 < "$b")
  else h=""; fi
  echo "installed_sha256=${{h%% *}}"
fi
"#,
        name = quote::sh(bin_name)
    );
    let out = ssh.run(&script, Input::None)?;
    let mut p = Probe::default();
    let mut path_bin = None;
    let mut path_version = String::new();
    let mut state = String::new();
    for line in out.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "os" => p.os = go_os(v),
            "arch" => p.arch = go_arch(v),
            "home" => p.home = v.into(),
            "data" => p.data = v.into(),
            "runtime" => p.runtime = v.into(),
            "state" => state = v.into(),
            "path_bin" => path_bin = Some(v.to_string()),
            "path_version" => path_version = v.into(),
            "installed" => p.installed = true,
            "installed_sha256" if !v.is_empty() => p.installed_sha256 = Some(v.into()),
            _ => {}
        }
    }
    p.path_bin = path_bin.map(|b| (b, path_version));
    if p.runtime.is_empty() {
        p.runtime = state;
    }
    if p.os.is_empty() || p.data.is_empty() || p.runtime.is_empty() {
        return Err(RemoteError::ProbeSilent(out.trim().to_string()));
    }
    for (what, v) in [
        ("home", &p.home),
        ("data", &p.data),
        ("runtime", &p.runtime),
    ] {
        if !v.starts_with('/') {
            return Err(RemoteError::RelativeRemoteDir {
                what,
                dir: v.to_string(),
            });
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names() {
        assert_eq!(go_os("Linux"), "linux");
        assert_eq!(go_os("Darwin"), "darwin");
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("armv7l"), "arm");
        assert_eq!(go_arch("i686"), "386");
        assert_eq!(go_arch("riscv64"), "riscv64");
    }

    #[test]
    fn env_names_are_checked_and_values_quoted() {
        let p = prelude(&[("HOME".into(), "/tmp/it's".into())]).expect("prelude");
        assert!(p.contains("HOME='/tmp/it'\\''s'; export HOME"), "{p}");
        assert!(prelude(&[("A;B".into(), "x".into())]).is_err());
        assert!(prelude(&[("1A".into(), "x".into())]).is_err());
        assert!(prelude(&[("A".into(), "x\ny".into())]).is_err());
    }
}
