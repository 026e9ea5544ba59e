//! How Twinlog's own client authenticates to a broker it dials (a mirror's source):
//! Kafka's client keys `security.protocol`, `ssl.truststore.*`, `ssl.keystore.*`,
//! `ssl.endpoint.identification.algorithm`, `sasl.mechanism` and `sasl.jaas.config`
//! (PlainLoginModule or ScramLoginModule with `username` and `password`;
//! OAuthBearerLoginModule with a token from the file of
//! `sasl.oauthbearer.token.endpoint.url`, or Kafka's unsecured
//! `unsecuredLoginStringClaim_sub` test tokens), read from a mirror's configs by
//! [`ClientSecurity::from_configs`].
//!
//! [`ClientSecurity`] holds the settings, not the loaded keys, so two configs compare
//! equal exactly when they say the same (a changed password restarts the fetchers). Its
//! `Debug` never shows the password.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::net::listener::SecurityProtocol;
use crate::net::scram::ScramMechanism;
use crate::net::tls::Pem;

/// The SASL mechanism and credentials of a client.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    /// PLAIN's and SCRAM's user; OAUTHBEARER's unsecured principal, if any.
    pub username: String,
    pub password: String,
    /// Where OAUTHBEARER's token comes from.
    pub oauth: Option<OAuthLogin>,
}

/// How an OAUTHBEARER client gets its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthLogin {
    /// A JWT the identity provider issued, in this file (Kafka's
    /// `sasl.oauthbearer.token.endpoint.url=file:...`), read at every login so that a
    /// refreshed token is picked up.
    TokenFile(std::path::PathBuf),
    /// An unsigned token for this principal, valid this long (Kafka's
    /// `unsecuredLoginStringClaim_sub` and `unsecuredLoginLifetimeSeconds`).
    Unsecured {
        principal: String,
        lifetime: std::time::Duration,
    },
}

impl OAuthLogin {
    /// The token to send now.
    pub fn token(&self) -> Result<String, String> {
        match self {
            OAuthLogin::TokenFile(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_owned())
                .map_err(|e| format!("reading the OAUTHBEARER token {}: {e}", path.display())),
            OAuthLogin::Unsecured {
                principal,
                lifetime,
            } => Ok(crate::net::oauth::unsecured_token(
                principal,
                std::time::SystemTime::now(),
                *lifetime,
            )),
        }
    }
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// The SASL mechanisms the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// The TLS settings of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// CAs to trust; `None`: the system bundle.
    pub truststore: Option<Pem>,
    /// A client certificate and key (mTLS); empty for none.
    pub keystore: Vec<Pem>,
    /// Whether the broker's certificate must name the host dialled.
    pub verify_hostname: bool,
}

impl ClientTls {
    /// Reads the PEM files into a rustls client config.
    pub fn load(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        crate::net::tls::client_config(
            self.truststore.as_ref(),
            &self.keystore,
            self.verify_hostname,
        )
        .map_err(|e| format!("TLS settings: {e}"))
    }
}

/// Everything a connection needs to get past a secured listener; the default is
/// PLAINTEXT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSecurity {
    pub tls: Option<ClientTls>,
    pub sasl: Option<SaslLogin>,
}

/// How this broker's own connections to its cluster's brokers get past their
/// inter-broker listener: replication, transaction markers, the mirror's requests to
/// other brokers and to this one. Set once by `serve` at start; PLAINTEXT until then
/// (and in unit tests).
static INTER_BROKER: std::sync::OnceLock<ClientSecurity> = std::sync::OnceLock::new();

/// Sets [`inter_broker`] (the first call wins; it is a node's static config).
pub fn set_inter_broker(security: ClientSecurity) {
    let _ = INTER_BROKER.set(security);
}

/// The security of a connection from this broker to a broker of its own cluster (the
/// inter-broker listener's protocol, `sasl.mechanism.inter.broker.protocol` and the
/// listener's own keys).
pub fn inter_broker() -> ClientSecurity {
    INTER_BROKER.get().cloned().unwrap_or_default()
}

/// The keys [`ClientSecurity::from_configs`] reads.
pub const SECURITY_KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.oauthbearer.token.endpoint.url",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm",
];

/// OAUTHBEARER's login: a token file (`sasl.oauthbearer.token.endpoint.url` as a
/// `file:` URL), or the JAAS config's unsecured `unsecuredLoginStringClaim_sub`.
fn oauth_login(
    token_url: Option<&str>,
    options: &BTreeMap<String, String>,
) -> Result<SaslLogin, String> {
    let login = |oauth: OAuthLogin, username: String| SaslLogin {
        mechanism: SaslMechanism::OAuthBearer,
        username,
        password: String::new(),
        oauth: Some(oauth),
    };
    if let Some(url) = token_url {
        let path = url.strip_prefix("file:").ok_or_else(|| {
            format!("sasl.oauthbearer.token.endpoint.url: `{url}` is not a file: URL (Twinlog reads a token an identity provider issued from a file; it has no HTTP client for the client-credentials grant)")
        })?;
        let path = path.strip_prefix("//").unwrap_or(path);
        if !path.starts_with('/') {
            return Err(format!(
                "sasl.oauthbearer.token.endpoint.url: `{url}` needs an absolute path"
            ));
        }
        return Ok(login(OAuthLogin::TokenFile(path.into()), String::new()));
    }
    let principal = options.get("unsecuredLoginStringClaim_sub").ok_or(
        "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (a file: URL holding the token) or, for unsigned test tokens, unsecuredLoginStringClaim_sub in sasl.jaas.config",
    )?;
    let lifetime = match options.get("unsecuredLoginLifetimeSeconds") {
        None => 3600,
        Some(s) => s.trim().parse::<u64>().map_err(|_| {
            "sasl.jaas.config: unsecuredLoginLifetimeSeconds is not a number of seconds".to_string()
        })?,
    };
    Ok(login(
        OAuthLogin::Unsecured {
            principal: principal.clone(),
            lifetime: std::time::Duration::from_secs(lifetime),
        },
        principal.clone(),
    ))
}

impl ClientSecurity {
    /// The security settings of a set of client configs. `Err` says which key is wrong.
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Result<ClientSecurity, String> {
        let get = |k: &str| configs.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let protocol = match get("security.protocol") {
            None => SecurityProtocol::Plaintext,
            Some(p) => SecurityProtocol::parse(p).ok_or_else(|| {
                format!("security.protocol: unknown protocol `{p}` (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")
            })?,
        };
        let tls = if protocol.uses_tls() {
            for key in ["ssl.truststore.type", "ssl.keystore.type"] {
                if let Some(t) = get(key) {
                    if !t.eq_ignore_ascii_case("PEM") {
                        return Err(format!("{key}: only PEM stores are supported, not {t}"));
                    }
                }
            }
            let truststore = match (
                get("ssl.truststore.location"),
                get("ssl.truststore.certificates"),
            ) {
                (Some(path), _) => Some(Pem::File(path.into())),
                (None, Some(pem)) => Some(Pem::Inline(pem.to_owned())),
                (None, None) => None,
            };
            let keystore = match (
                get("ssl.keystore.location"),
                get("ssl.keystore.key"),
                get("ssl.keystore.certificate.chain"),
            ) {
                (Some(path), _, _) => vec![Pem::File(path.into())],
                (None, Some(key), Some(chain)) => {
                    vec![Pem::Inline(key.to_owned()), Pem::Inline(chain.to_owned())]
                }
                (None, Some(_), None) | (None, None, Some(_)) => {
                    return Err(
                        "ssl.keystore.key and ssl.keystore.certificate.chain go together".into(),
                    )
                }
                (None, None, None) => Vec::new(),
            };
            let verify_hostname = match configs.get("ssl.endpoint.identification.algorithm") {
                None => true,
                Some(v) if v.trim().eq_ignore_ascii_case("https") => true,
                Some(v) if v.trim().is_empty() => false,
                Some(v) => {
                    return Err(format!(
                        "ssl.endpoint.identification.algorithm: expected https or empty, got `{v}`"
                    ))
                }
            };
            Some(ClientTls {
                truststore,
                keystore,
                verify_hostname,
            })
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            let mechanism = match get("sasl.mechanism").unwrap_or("GSSAPI") {
                "PLAIN" => SaslMechanism::Plain,
                "OAUTHBEARER" => SaslMechanism::OAuthBearer,
                m => match ScramMechanism::from_name(m) {
                    Some(s) => SaslMechanism::Scram(s),
                    None => {
                        return Err(format!(
                            "sasl.mechanism: `{m}` is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"
                        ))
                    }
                },
            };
            let jaas = get("sasl.jaas.config")
                .ok_or("sasl.jaas.config is required with a SASL security.protocol")?;
            let (module, options) = crate::net::sasl::jaas_options(jaas)
                .map_err(|e| format!("sasl.jaas.config: {e}"))?;
            let expected = match mechanism {
                SaslMechanism::Plain => "PlainLoginModule",
                SaslMechanism::Scram(_) => "ScramLoginModule",
                SaslMechanism::OAuthBearer => "OAuthBearerLoginModule",
            };
            if !module.ends_with(expected) {
                return Err(format!(
                    "sasl.jaas.config: {} needs the {expected}, not {module}",
                    mechanism.name()
                ));
            }
            let option = |name: &str| {
                options
                    .get(name)
                    .cloned()
                    .ok_or_else(|| format!("sasl.jaas.config: no {name}=\"...\""))
            };
            if mechanism == SaslMechanism::OAuthBearer {
                Some(oauth_login(
                    get("sasl.oauthbearer.token.endpoint.url"),
                    &options,
                )?)
            } else {
                Some(SaslLogin {
                    mechanism,
                    username: option("username")?,
                    password: option("password")?,
                    oauth: None,
                })
            }
        } else {
            None
        };
        Ok(ClientSecurity { tls, sasl })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_client_keys_give_the_security_settings() {
        assert_eq!(
            ClientSecurity::from_configs(&configs(&[])),
            Ok(ClientSecurity::default())
        );
        let s = ClientSecurity::from_configs(&configs(&[
            ("security.protocol", "SASL_SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", "/etc/ca.pem"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="p w";"#,
            ),
        ]))
        .expect("valid");
        let tls = s.tls.expect("tls");
        assert_eq!(tls.truststore, Some(Pem::File("/etc/ca.pem".into())));
        assert!(tls.verify_hostname);
        let sasl = s.sasl.expect("sasl");
        assert_eq!(sasl.mechanism, SaslMechanism::Scram(ScramMechanism::Sha512));
        assert_eq!(
            (sasl.username.as_str(), sasl.password.as_str()),
            ("mirror", "p w")
        );
        assert!(!format!("{sasl:?}").contains("p w"));
    }

    #[test]
    fn wrong_client_keys_are_named() {
        for (pairs, key) in [
            (vec![("security.protocol", "SASL")], "security.protocol"),
            (
                vec![("security.protocol", "SASL_PLAINTEXT")],
                "sasl.mechanism",
            ),
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "PLAIN"),
                ],
                "sasl.jaas.config",
            ),
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "PLAIN"),
                    (
                        "sasl.jaas.config",
                        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";"#,
                    ),
                ],
                "PlainLoginModule",
            ),
            (
                vec![("security.protocol", "SSL"), ("ssl.truststore.type", "JKS")],
                "ssl.truststore.type",
            ),
        ] {
            let e = ClientSecurity::from_configs(&configs(&pairs)).expect_err("invalid");
            assert!(e.contains(key), "{e} should name {key}");
        }
    }
}
