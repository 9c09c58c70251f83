//! TLS for the hosts a secret is bound to (docs/network.md, "Secrets"):
//! the server's certificate authority, made at start-up with a key that
//! never leaves the server's memory, signs a certificate for each such
//! host the run connects to (ALPN `http/1.1`); upstream, every
//! certificate is verified against the system's roots (those the server's
//! own `SSL_CERT_FILE` / `SSL_CERT_DIR` name, when set). The bundle a run
//! trusts is those roots plus the authority.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate could not be made.
    #[error("cannot make a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused a configuration.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// No root certificate could be loaded.
    #[error("no root certificates: {0}")]
    Roots(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's certificate authority for intercepted hosts.
pub struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority(…)")
    }
}

impl Authority {
    /// A new authority with a new key.
    pub fn new() -> Result<Authority, TlsError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, "toolsrv proxy authority");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "toolsrv");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// Its certificate (PEM), for the runs' bundle.
    pub fn certificate_pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server side for `host`: a certificate for it signed by the
    /// authority (made once per host), ALPN `http/1.1` only.
    pub(crate) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        if let Some(c) = self
            .leaves
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
        {
            return Ok(c.clone());
        }
        let mut params = CertificateParams::new(vec![host.to_string()])?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key_der)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        self.leaves
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host.to_string(), config.clone());
        Ok(config)
    }
}

/// How upstreams are verified: the system's roots.
#[derive(Clone)]
pub struct Upstream {
    config: Arc<ClientConfig>,
    roots: Arc<Vec<CertificateDer<'static>>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upstream({} roots)", self.roots.len())
    }
}

impl Upstream {
    /// The system's roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` of this process
    /// when set), ALPN `http/1.1`.
    pub fn from_system() -> Result<Upstream, TlsError> {
        let found = rustls_native_certs::load_native_certs();
        let none = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), |e| e.to_string());
        Upstream::with(found.certs, &none)
    }

    /// Roots from a PEM bundle (the certificates in it), ALPN `http/1.1`.
    pub fn from_pem(pem: &str) -> Result<Upstream, TlsError> {
        use rustls_pki_types::pem::PemObject;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .filter_map(Result::ok)
            .collect();
        Upstream::with(certs, "no certificate in the bundle")
    }

    fn with(certs: Vec<CertificateDer<'static>>, none: &str) -> Result<Upstream, TlsError> {
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(certs.iter().cloned());
        if added == 0 {
            return Err(TlsError::Roots(none.to_string()));
        }
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(store)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Upstream {
            config: Arc::new(config),
            roots: Arc::new(certs),
        })
    }

    pub(crate) fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }

    /// The roots and `authority` as one PEM bundle: what a run trusts.
    pub fn bundle(&self, authority: &Authority) -> String {
        use base64::Engine;
        let e = base64::engine::general_purpose::STANDARD;
        let mut out = String::new();
        for c in self.roots.iter() {
            out.push_str("-----BEGIN CERTIFICATE-----\n");
            let b64 = e.encode(c.as_ref());
            for line in b64.as_bytes().chunks(64) {
                out.push_str(&String::from_utf8_lossy(line));
                out.push('\n');
            }
            out.push_str("-----END CERTIFICATE-----\n");
        }
        out.push_str(authority.certificate_pem());
        out
    }
}

/// What interception needs: the authority that signs for intercepted
/// hosts and how upstreams are verified.
#[derive(Debug, Clone)]
pub struct Interception {
    /// The server's authority.
    pub authority: Arc<Authority>,
    /// The upstreams' verification.
    pub upstream: Upstream,
}
