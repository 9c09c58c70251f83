//! A run's secrets (docs/network.md, "Secrets"): each policy `secrets:`
//! entry's real value, read for the run from toolsrv's own environment or
//! its file, paired with a fresh placeholder shaped like it; the run's
//! variables get the placeholders, never the values. Where a secret goes
//! over TLS, the run also trusts the server's authority: the bundle of the
//! system's roots, the user's own CA files and that authority, named by
//! the variables TLS clients read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use toolsrv_netproxy::{Authority, Interception, Secret, Secrets, Upstream};
use toolsrv_sandbox::{PathContext, Policy, SecretSource};

use super::Refused;

/// The variables that name the CA bundle a TLS client trusts.
const BUNDLE_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
];

/// The system bundle merged into the runs' bundle besides what
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` name.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Why a secret could not be had for a run; never its value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// Its source is missing or unreadable.
    #[error("sandbox: secrets: {name}: {why}")]
    Source {
        /// The secret's variable.
        name: String,
        /// Why.
        why: String,
    },
    /// TLS interception could not be set up.
    #[error("sandbox: secrets: cannot intercept TLS for the secrets' hosts: {0}")]
    Tls(String),
}

/// A run's secrets and the variables that go with them.
pub(crate) struct RunSecrets {
    /// The values and placeholders, for the proxy.
    pub(crate) secrets: Secrets,
    /// `NAME=placeholder` for each, and the bundle variables.
    pub(crate) variables: Vec<(String, String)>,
    /// How the secrets' hosts' TLS is made.
    pub(crate) tls: Interception,
    /// The variables of toolsrv's environment the values came from: never
    /// passed through to the run.
    pub(crate) withheld: Vec<String>,
}

/// The server's authority and its bundle file, made on first use.
#[derive(Default)]
pub(crate) struct Tls {
    made: OnceLock<Result<(Interception, Bundle), String>>,
    dir: OnceLock<PathBuf>,
}

/// The runs' bundle file as written.
struct Bundle {
    path: PathBuf,
    text: String,
    written: std::sync::Mutex<Option<(u64, std::time::SystemTime)>>,
}

impl Tls {
    /// The directory the bundle is written in (the server's own temporary
    /// directory, `{TOOLSRV_TMPDIR}`, which the built-in policy grants).
    pub(crate) fn set_dir(&self, dir: PathBuf) {
        let _ = self.dir.set(dir);
    }

    /// The interception and the bundle's path, the file written again if
    /// it is not as written (a tool may replace it: only the proxy is on a
    /// run's path, so what it trusts matters only to itself).
    fn get(&self) -> Result<(Interception, PathBuf), SecretError> {
        let made = self.made.get_or_init(|| {
            let authority = Authority::new().map_err(|e| e.to_string())?;
            let upstream = Upstream::from_system().map_err(|e| e.to_string())?;
            let mut text = upstream.bundle(&authority);
            if let Ok(system) = std::fs::read_to_string(SYSTEM_BUNDLE) {
                text.push_str(&system);
            }
            let dir = self.dir.get().cloned().unwrap_or_else(std::env::temp_dir);
            let path = dir.join(format!("toolsrv-ca-bundle-{}.pem", std::process::id()));
            let interception = Interception {
                authority: std::sync::Arc::new(authority),
                upstream,
            };
            Ok((
                interception,
                Bundle {
                    path,
                    text,
                    written: std::sync::Mutex::new(None),
                },
            ))
        });
        let (interception, bundle) = made.as_ref().map_err(|e| SecretError::Tls(e.clone()))?;
        bundle.ensure().map_err(|e| {
            SecretError::Tls(format!("cannot write {}: {e}", bundle.path.display()))
        })?;
        Ok((interception.clone(), bundle.path.clone()))
    }
}

impl Bundle {
    fn ensure(&self) -> std::io::Result<()> {
        use toolsrv_base::LockUnpoisoned;
        let mut w = self.written.lock_unpoisoned();
        let now = std::fs::symlink_metadata(&self.path)
            .ok()
            .filter(|m| m.file_type().is_file())
            .and_then(|m| Some((m.len(), m.modified().ok()?)));
        if now.is_some() && now == *w {
            return Ok(());
        }
        let tmp = self.path.with_extension("pem.new");
        let _ = std::fs::remove_file(&tmp);
        std::fs::write(&tmp, &self.text)?;
        std::fs::rename(&tmp, &self.path)?;
        let m = std::fs::metadata(&self.path)?;
        *w = Some((m.len(), m.modified()?));
        Ok(())
    }
}

/// The secrets of `policy` for one run: each value read now (`ctx`
/// expands a file's path; `own_env` is toolsrv's environment).
pub(crate) fn for_run(
    policy: &Policy,
    ctx: &PathContext,
    own_env: &HashMap<String, String>,
    tls: &Tls,
) -> Result<RunSecrets, Refused> {
    let mut list = Vec::with_capacity(policy.secrets.len());
    let mut variables = Vec::new();
    let mut withheld = Vec::new();
    for spec in &policy.secrets {
        let failed = |why: String| SecretError::Source {
            name: spec.env.clone(),
            why,
        };
        let value = match &spec.from {
            SecretSource::Env(name) => {
                withheld.push(name.clone());
                own_env
                    .get(name)
                    .filter(|v| !v.is_empty())
                    .cloned()
                    .ok_or_else(|| failed(format!("toolsrv's environment has no {name}")))?
            }
            SecretSource::File(path) => {
                read_secret_file(&ctx.expand(path).map_err(&failed)?).map_err(&failed)?
            }
        };
        let secret = Secret::new(&spec.env, value, &spec.hosts, spec.plaintext);
        variables.push((spec.env.clone(), secret.placeholder.clone()));
        list.push(secret);
    }
    let (interception, bundle) = tls.get()?;
    let bundle = bundle.display().to_string();
    variables.extend(
        BUNDLE_VARIABLES
            .iter()
            .map(|v| (v.to_string(), bundle.clone())),
    );
    Ok(RunSecrets {
        secrets: Secrets::new(list),
        variables,
        tls: interception,
        withheld,
    })
}

/// A secret file's value: its text, a trailing newline dropped.
fn read_secret_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let value = text.trim_end_matches(['\n', '\r']).to_string();
    if value.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(value)
}
