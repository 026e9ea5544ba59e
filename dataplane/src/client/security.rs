//! How Twinlog's own client authenticates to a broker it dials (a mirror's source):
//! Kafka's client keys `security.protocol`, `ssl.truststore.*`, `ssl.keystore.*`,
//! `ssl.endpoint.identification.algorithm`, `sasl.mechanism` and `sasl.jaas.config`
//! (PlainLoginModule or ScramLoginModule with `username` and `password`), read from a
//! mirror's configs by [`ClientSecurity::from_configs`].
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
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .finish()
    }
}

/// The SASL mechanisms the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
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
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm",
];

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
                m => match ScramMechanism::from_name(m) {
                    Some(s) => SaslMechanism::Scram(s),
                    None => {
                        return Err(format!(
                            "sasl.mechanism: `{m}` is not supported (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
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
            Some(SaslLogin {
                mechanism,
                username: option("username")?,
                password: option("password")?,
            })
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
