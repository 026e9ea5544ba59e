//! Named listeners (Kafka's `listeners` with `listener.security.protocol.map`): each
//! has a name, a security protocol, where it binds and what it advertises, and the
//! SASL and TLS its protocol needs. Every shard binds every listener.

use std::net::SocketAddr;
use std::sync::Arc;

use super::sasl::SaslConfig;
use super::tls::TlsConfig;

/// Kafka's `SecurityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn parse(text: &str) -> Option<SecurityProtocol> {
        let text = text.trim();
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(text))
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One client listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Upper case, as in `listeners` (`PLAINTEXT`, `EXTERNAL`, ...).
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    /// `advertised.listeners`' entry for this name; `None`: `bind`.
    pub advertised: Option<SocketAddr>,
    /// Set exactly when the protocol is SASL_*.
    pub sasl: Option<Arc<SaslConfig>>,
    /// Set exactly when the protocol is SSL or SASL_SSL.
    pub tls: Option<Arc<TlsConfig>>,
}

impl ListenerConfig {
    /// A PLAINTEXT listener named PLAINTEXT.
    pub fn plaintext(bind: SocketAddr) -> ListenerConfig {
        ListenerConfig {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind,
            advertised: None,
            sasl: None,
            tls: None,
        }
    }

    /// The address clients of this listener are told to connect to.
    pub fn advertised(&self) -> SocketAddr {
        self.advertised.unwrap_or(self.bind)
    }
}
