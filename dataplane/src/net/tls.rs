//! TLS of an SSL or SASL_SSL listener, with rustls (ring provider). The handshake and
//! every record's encryption run in the connection's own task on the shard that
//! accepted it (futures-rustls over glommio's socket): no thread hop, no OpenSSL.
//!
//! Keys follow Kafka's PEM keystore (KIP-651): `ssl.keystore.location` names a PEM
//! file holding the private key (PKCS#8, PKCS#1 or SEC1, unencrypted) and the
//! certificate chain, or `ssl.keystore.key` and `ssl.keystore.certificate.chain` hold
//! them inline; `ssl.truststore.location` / `ssl.truststore.certificates` hold the CAs
//! client certificates are checked against (`ssl.client.auth`). A listener whose PEM
//! files change is reloaded without a restart: each shard looks at the files' length
//! and modification time at most every [`RELOAD_CHECK`] when it accepts a connection,
//! and a new file that does not load is logged and leaves the old keys in use.
//!
//! The principal of a connection with a client certificate is `User:` and the
//! certificate's subject in RFC 2253 form, through `ssl.principal.mapping.rules`
//! (Kafka's `SslPrincipalMapper`); without one it is `User:ANONYMOUS`.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Length and modification time of each PEM file (`None`: inline, or unreadable).
type Stamp = Vec<Option<(u64, SystemTime)>>;

/// How often a shard looks at a listener's PEM files for a change.
pub const RELOAD_CHECK: Duration = Duration::from_secs(5);

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// Asked for; a client without one connects as `User:ANONYMOUS`.
    Requested,
    /// A client without a certificate the truststore vouches for is refused.
    Required,
}

impl ClientAuth {
    pub fn parse(text: &str) -> Option<ClientAuth> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// Where PEM text comes from: a file (reloaded when it changes) or the config itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

/// One listener's TLS settings, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The private key and certificate chain: one PEM holding both, or the key and the
    /// chain apart (`ssl.keystore.key`, `ssl.keystore.certificate.chain`).
    pub keystore: Vec<Pem>,
    /// CA certificates for client certificates; required unless `client_auth` is none.
    pub truststore: Option<Pem>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3 (both by default).
    pub tls12: bool,
    pub tls13: bool,
    pub principal_rules: Vec<PrincipalRule>,
}

/// Why a listener's TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{what}: {message}")]
    Pem { what: &'static str, message: String },
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

impl TlsConfig {
    /// Reads the PEM files and builds the rustls server config.
    pub fn load(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (chain, key) = load_keystore(&self.keystore)?;
        let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
        if self.tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            versions.push(&rustls::version::TLS12);
        }
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)?;
        let builder = match (self.client_auth, &self.truststore) {
            (ClientAuth::None, _) => builder.with_no_client_auth(),
            (auth, Some(truststore)) => {
                let roots = load_roots(truststore)?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| TlsError::Verifier(e.to_string()))?,
                )
            }
            (_, None) => {
                return Err(TlsError::Pem {
                    what: "truststore",
                    message: "ssl.client.auth asks for client certificates but no ssl.truststore.location or ssl.truststore.certificates names their CAs".into(),
                })
            }
        };
        Ok(Arc::new(builder.with_single_cert(chain, key)?))
    }

    /// Length and modification time of every PEM file (inline PEM never changes).
    fn stamp(&self) -> Stamp {
        self.keystore
            .iter()
            .chain(self.truststore.iter())
            .map(|p| match p {
                Pem::File(path) => std::fs::metadata(path)
                    .ok()
                    .and_then(|m| Some((m.len(), m.modified().ok()?))),
                Pem::Inline(_) => None,
            })
            .collect()
    }

    /// A connection's principal: `User:` and its client certificate's mapped subject,
    /// `User:ANONYMOUS` without one. `Err`: no mapping rule applies to the subject.
    pub fn principal(
        &self,
        peer_certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<String, String> {
        let Some(cert) = peer_certificates.and_then(|c| c.first()) else {
            return Ok("User:ANONYMOUS".into());
        };
        let dn = subject_rfc2253(cert.as_ref())?;
        map_principal(&self.principal_rules, &dn).map(|name| format!("User:{name}"))
    }
}

/// A keystore's certificate chain and (unencrypted) private key.
fn load_keystore(
    keystore: &[Pem],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let mut chain = Vec::new();
    let mut key = None;
    for source in keystore {
        let text = read_pem(source)?;
        for cert in CertificateDer::pem_slice_iter(&text) {
            chain.push(cert.map_err(|e| pem_error("keystore certificate", e))?);
        }
        if key.is_none() && has_private_key(&text) {
            if text
                .windows(b"ENCRYPTED PRIVATE KEY".len())
                .any(|w| w == b"ENCRYPTED PRIVATE KEY")
            {
                return Err(TlsError::Pem {
                    what: "keystore key",
                    message: "an encrypted private key (ssl.key.password) is not supported; give the key unencrypted, readable by the broker only".into(),
                });
            }
            key = Some(
                PrivateKeyDer::from_pem_slice(&text).map_err(|e| pem_error("keystore key", e))?,
            );
        }
    }
    let key = key.ok_or_else(|| TlsError::Pem {
        what: "keystore",
        message: "no PRIVATE KEY block".into(),
    })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            what: "keystore",
            message: "no CERTIFICATE block".into(),
        });
    }
    Ok((chain, key))
}

/// The CA certificates of a truststore.
fn load_roots(truststore: &Pem) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read_pem(truststore)?) {
        roots
            .add(cert.map_err(|e| pem_error("truststore certificate", e))?)
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::Pem {
            what: "truststore",
            message: "no CERTIFICATE block".into(),
        });
    }
    Ok(roots)
}

/// Where Debian keeps the system's CA bundle: a client with no truststore trusts it.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// TLS settings of a connection Twinlog makes (a mirror's source): the CAs it trusts
/// (the system bundle when `None`), an optional client certificate, and whether the
/// server's certificate must name the host dialled
/// (`ssl.endpoint.identification.algorithm` = https, Kafka's default).
pub fn client_config(
    truststore: Option<&Pem>,
    keystore: &[Pem],
    verify_hostname: bool,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let system = Pem::File(PathBuf::from(SYSTEM_CA_BUNDLE));
    let roots = Arc::new(load_roots(truststore.unwrap_or(&system))?);
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let builder = if verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyNameVerifier(verifier)))
    };
    let config = if keystore.is_empty() {
        builder.with_no_client_auth()
    } else {
        let (chain, key) = load_keystore(keystore)?;
        builder.with_client_auth_cert(chain, key)?
    };
    Ok(Arc::new(config))
}

/// Checks the server's chain against the trusted CAs but not the name in it
/// (`ssl.endpoint.identification.algorithm` set empty).
#[derive(Debug)]
struct AnyNameVerifier(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn read_pem(source: &Pem) -> Result<Vec<u8>, TlsError> {
    match source {
        Pem::File(path) => std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.display().to_string(),
            source,
        }),
        Pem::Inline(text) => Ok(text.as_bytes().to_vec()),
    }
}

fn has_private_key(text: &[u8]) -> bool {
    text.windows(b"PRIVATE KEY-----".len())
        .any(|w| w == b"PRIVATE KEY-----")
}

fn pem_error(what: &'static str, e: rustls::pki_types::pem::Error) -> TlsError {
    TlsError::Pem {
        what,
        message: e.to_string(),
    }
}

/// One listener's TLS on one shard: the acceptor in use, swapped when the PEM files
/// change.
pub struct ShardTls {
    pub config: Arc<TlsConfig>,
    listener: String,
    current: RefCell<(futures_rustls::TlsAcceptor, Stamp)>,
    next_check: Cell<Instant>,
}

impl std::fmt::Debug for ShardTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardTls")
            .field("listener", &self.listener)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ShardTls {
    pub fn new(listener: &str, config: Arc<TlsConfig>) -> Result<ShardTls, TlsError> {
        let stamp = config.stamp();
        let acceptor = futures_rustls::TlsAcceptor::from(config.load()?);
        Ok(ShardTls {
            config,
            listener: listener.to_owned(),
            current: RefCell::new((acceptor, stamp)),
            next_check: Cell::new(Instant::now() + RELOAD_CHECK),
        })
    }

    /// The acceptor for a new connection, after reloading the keys if their files
    /// changed since the last look.
    pub fn acceptor(&self) -> futures_rustls::TlsAcceptor {
        let now = Instant::now();
        if now >= self.next_check.get() {
            self.next_check.set(now + RELOAD_CHECK);
            let stamp = self.config.stamp();
            if stamp != self.current.borrow().1 {
                match self.config.load() {
                    Ok(server) => {
                        tracing::info!(listener = %self.listener, "TLS keys reloaded: the PEM files changed");
                        *self.current.borrow_mut() =
                            (futures_rustls::TlsAcceptor::from(server), stamp);
                    }
                    Err(e) => {
                        tracing::warn!(listener = %self.listener, error = %e, "TLS keys not reloaded: the changed PEM files do not load; the previous keys stay in use");
                        self.current.borrow_mut().1 = stamp;
                    }
                }
            }
        }
        self.current.borrow().0.clone()
    }
}

/// A certificate's subject as Java's `X500Principal.getName()` writes it (RFC 2253:
/// the last RDN first, `,` between RDNs, `+` inside one, special characters escaped).
pub fn subject_rfc2253(der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("client certificate does not parse: {e}"))?;
    let rdns: Vec<_> = cert.subject().iter().collect();
    let mut out = String::new();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, attr) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attr.attr_type().to_id_string();
            match (attribute_keyword(&oid), attr.as_str()) {
                (Some(keyword), Ok(value)) => {
                    out.push_str(keyword);
                    out.push('=');
                    escape_rfc2253(value, &mut out);
                }
                _ => {
                    out.push_str(&oid);
                    out.push_str("=#");
                    for b in attr.attr_value().data.iter() {
                        out.push_str(&format!("{b:02x}"));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The keywords RFC 2253 output uses (the ones Java's `X500Principal` writes).
fn attribute_keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape_rfc2253(value: &str, out: &mut String) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

/// One of `ssl.principal.mapping.rules`: `DEFAULT` (the subject as it is) or
/// `RULE:pattern/replacement/[LU]` (a subject the pattern matches whole becomes the
/// replacement, `$1` its first group, then lower or upper case).
#[derive(Debug, Clone)]
pub enum PrincipalRule {
    Default,
    Rule {
        pattern: regex::Regex,
        replacement: String,
        case: Option<char>,
    },
}

impl PartialEq for PrincipalRule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PrincipalRule::Default, PrincipalRule::Default) => true,
            (
                PrincipalRule::Rule {
                    pattern: a,
                    replacement: ra,
                    case: ca,
                },
                PrincipalRule::Rule {
                    pattern: b,
                    replacement: rb,
                    case: cb,
                },
            ) => a.as_str() == b.as_str() && ra == rb && ca == cb,
            _ => false,
        }
    }
}

impl Eq for PrincipalRule {}

/// Parses `ssl.principal.mapping.rules` (Kafka's syntax: rules separated by commas,
/// `\/` for a slash inside a pattern or replacement).
pub fn parse_principal_rules(text: &str) -> Result<Vec<PrincipalRule>, String> {
    let mut rules = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("DEFAULT") {
            rules.push(PrincipalRule::Default);
            rest = after;
        } else if let Some(after) = rest.strip_prefix("RULE:") {
            let (pattern, after) =
                until_slash(after).ok_or_else(|| format!("rule {rest:?} has no /replacement/"))?;
            let (replacement, after) = until_slash(after)
                .ok_or_else(|| format!("rule {rest:?} does not end its replacement with /"))?;
            let (case, after) = match after.chars().next() {
                Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                _ => (None, after),
            };
            let pattern = regex::Regex::new(&format!("^(?:{pattern})$"))
                .map_err(|e| format!("rule pattern {pattern:?}: {e}"))?;
            rules.push(PrincipalRule::Rule {
                pattern,
                replacement: java_replacement(&replacement),
                case,
            });
            rest = after;
        } else {
            return Err(format!(
                "{rest:?} is neither DEFAULT nor RULE:pattern/replacement/[LU]"
            ));
        }
        rest = rest.trim_start();
        match rest.strip_prefix(',') {
            Some(after) => rest = after.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(format!("expected a comma before {rest:?}")),
        }
    }
    if rules.is_empty() {
        rules.push(PrincipalRule::Default);
    }
    Ok(rules)
}

/// The text up to the next unescaped `/` (with `\/` unescaped), and what follows it.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` group references as the regex crate's `${1}`.
fn java_replacement(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                out.push(d);
                chars.next();
            }
            out.push('}');
        } else if c == '$' {
            out.push_str("$$");
        } else {
            out.push(c);
        }
    }
    out
}

/// The principal name `rules` give a subject: the first rule that applies.
pub fn map_principal(rules: &[PrincipalRule], dn: &str) -> Result<String, String> {
    for rule in rules {
        match rule {
            PrincipalRule::Default => return Ok(dn.to_owned()),
            PrincipalRule::Rule {
                pattern,
                replacement,
                case,
            } => {
                if pattern.is_match(dn) {
                    let name = pattern.replace(dn, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
            }
        }
    }
    Err(format!(
        "no ssl.principal.mapping.rules rule applies to {dn:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_rules_parse_and_apply_as_kafka_documents() {
        let rules = parse_principal_rules(
            r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.\/]*).*$/$1/U,DEFAULT",
        )
        .expect("rules");
        assert_eq!(rules.len(), 4);
        let map = |dn| map_principal(&rules, dn).expect("mapped");
        assert_eq!(map("CN=kafka-client,OU=ServiceUsers,O=Org"), "kafka-client");
        assert_eq!(
            map("CN=Duke,OU=JavaSoft,O=Sun,L=MPK,ST=CA,C=US"),
            "duke@javasoft"
        );
        assert_eq!(map("OU=x,cn=a.b/c"), "A.B/C");
        assert_eq!(map("O=nothing"), "O=nothing");
        let strict = parse_principal_rules(r"RULE:^CN=(.*)$/$1/").expect("rule");
        assert!(map_principal(&strict, "O=x").is_err());
        assert_eq!(
            parse_principal_rules("").expect("empty"),
            vec![PrincipalRule::Default]
        );
        assert!(parse_principal_rules("RULE:^CN=(.*)$").is_err());
        assert!(parse_principal_rules("LOUD").is_err());
    }

    #[test]
    fn a_subject_reads_as_rfc2253() {
        let mut params = rcgen::CertificateParams::new(vec!["client".into()]).expect("params");
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc");
        dn.push(rcgen::DnType::OrganizationalUnitName, "Ops");
        dn.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            subject_rfc2253(cert.der()).expect("subject"),
            r"CN=alice,OU=Ops,O=Acme\, Inc,C=US"
        );
    }

    fn write_key_pair(dir: &std::path::Path, cn: &str) -> (PathBuf, rcgen::Certificate) {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        let path = dir.join(format!("{cn}.pem"));
        std::fs::write(&path, format!("{}{}", key.serialize_pem(), cert.pem())).expect("write");
        (path, cert)
    }

    /// TLS with the key pair at `path` and no client certificates.
    fn server_only(path: &std::path::Path) -> TlsConfig {
        TlsConfig {
            keystore: vec![Pem::File(path.to_owned())],
            truststore: None,
            client_auth: ClientAuth::None,
            tls12: true,
            tls13: true,
            principal_rules: vec![PrincipalRule::Default],
        }
    }

    #[test]
    fn a_keystore_loads_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().expect("dir");
        let (path, cert) = write_key_pair(dir.path(), "broker");
        let config = server_only(&path);
        config.load().expect("loads");
        let required = TlsConfig {
            client_auth: ClientAuth::Required,
            ..config.clone()
        };
        assert!(required
            .load()
            .expect_err("no CAs")
            .to_string()
            .contains("truststore"));
        let with_cas = TlsConfig {
            truststore: Some(Pem::Inline(cert.pem())),
            ..required
        };
        with_cas.load().expect("client auth");
        let only_cert = TlsConfig {
            keystore: vec![Pem::Inline(cert.pem())],
            ..config.clone()
        };
        assert!(only_cert
            .load()
            .expect_err("no key")
            .to_string()
            .contains("PRIVATE KEY"));
        let missing = TlsConfig {
            keystore: vec![Pem::File(dir.path().join("absent.pem"))],
            ..config
        };
        assert!(missing
            .load()
            .expect_err("absent")
            .to_string()
            .contains("absent.pem"));
    }

    #[test]
    fn a_changed_keystore_is_reloaded_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let (path, _) = write_key_pair(dir.path(), "broker");
        let shard = ShardTls::new("SSL", Arc::new(server_only(&path))).expect("loads");
        let before = shard.current.borrow().1.clone();
        std::fs::write(&path, "not a pem").expect("write");
        shard.next_check.set(Instant::now());
        let _ = shard.acceptor();
        assert_ne!(shard.current.borrow().1, before, "the change was seen");
        let (_, _) = write_key_pair(dir.path(), "broker");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"\n"))
            .expect("touch");
        shard.next_check.set(Instant::now());
        let _ = shard.acceptor();
        assert_eq!(shard.current.borrow().1, shard.config.stamp());
    }
}
