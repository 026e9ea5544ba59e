//! SASL authentication of a SASL_PLAINTEXT listener (KIP-43, Kafka's
//! `SaslServerAuthenticator`): a connection may send ApiVersions, then SaslHandshake
//! (v1) naming a mechanism this listener enables, then SaslAuthenticate with the
//! mechanism's tokens; only once authenticated does it reach the other APIs. Anything
//! else before that closes the connection, as Kafka does. Mechanisms: PLAIN (RFC 4616)
//! against the users of the listener's JAAS config, SCRAM-SHA-256 / SCRAM-SHA-512
//! ([`super::scram`]) against the credentials AlterUserScramCredentials stored, and
//! OAUTHBEARER ([`super::oauth`]) against a JWKS.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::oauth::OAuthConfig;
use super::scram::{ScramCredential, ScramMechanism, ScramServer};

/// What a SASL listener accepts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, upper case, in order.
    pub mechanisms: Vec<String>,
    /// PLAIN's users and passwords (the JAAS config's `user_<name>="<password>"`).
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms`: how long a session lasts before the client must
    /// re-authenticate (KIP-368); 0 for never.
    pub reauth_ms: i64,
    /// `listener.name.<l>.<mechanism>.connections.max.reauth.ms`: a mechanism's own
    /// limit, over `reauth_ms` (keys upper case).
    pub reauth_ms_by_mechanism: BTreeMap<String, i64>,
    /// OAUTHBEARER's validation, when the listener enables it.
    pub oauth: Option<Arc<OAuthConfig>>,
}

/// The largest frame a connection may send before it has authenticated (Kafka's
/// `sasl.server.max.receive.size` default).
pub const MAX_RECEIVE_BYTES: usize = 524_288;

/// Mechanisms Twinlog implements.
pub const SUPPORTED_MECHANISMS: &[&str] =
    &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Finds a user's SCRAM credential for a mechanism (the metadata image's).
pub type ScramLookup<'a> = &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>;

/// A lookup that knows no one.
pub fn no_scram_users(_: &str, _: ScramMechanism) -> Option<ScramCredential> {
    None
}

/// Where one connection is in the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Before SaslHandshake.
    Handshake,
    /// The handshake chose this mechanism; its SaslAuthenticate comes next (or, after
    /// a v0 handshake, its token as a bare frame: `raw`).
    Authenticate { mechanism: String, raw: bool },
    /// Between SCRAM's two rounds.
    Scram { exchange: ScramServer, raw: bool },
    /// OAUTHBEARER sent its invalid-token challenge; the client's %x01 is answered
    /// with the failure.
    OAuthRefused { raw: bool },
    /// Authenticated as this user.
    Done(String),
}

/// One connection's authentication.
#[derive(Debug)]
pub struct SaslSession {
    config: Arc<SaslConfig>,
    state: State,
    /// While re-authenticating: the user and mechanism of the session being renewed,
    /// which must not change (Kafka refuses a change of principal or mechanism).
    renewing: Option<(String, String)>,
    /// The mechanism of the handshake, kept for a later re-authentication.
    mechanism: Option<String>,
    /// When the credential the session authenticated with expires (an OAUTHBEARER
    /// token's `exp`): the session ends then at the latest.
    credential_expires: Option<std::time::SystemTime>,
}

/// What the connection does after a SASL request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Keep reading (the exchange goes on, or it is done).
    Continue,
    /// Send the answer, then close (a refused mechanism or credentials).
    Close,
}

impl SaslSession {
    pub fn new(config: Arc<SaslConfig>) -> SaslSession {
        SaslSession {
            config,
            state: State::Handshake,
            renewing: None,
            mechanism: None,
            credential_expires: None,
        }
    }

    /// The session that re-authenticates this authenticated one (a SaslHandshake on
    /// an authenticated connection): the same user must log in with the same
    /// mechanism. `None` when this session has not authenticated.
    pub fn renewal(&self) -> Option<SaslSession> {
        let user = self.principal()?.to_owned();
        let mechanism = self.mechanism.clone()?;
        Some(SaslSession {
            config: Arc::clone(&self.config),
            state: State::Handshake,
            renewing: Some((user, mechanism)),
            mechanism: None,
            credential_expires: None,
        })
    }

    /// Whether this session re-authenticates an earlier one.
    pub fn is_renewal(&self) -> bool {
        self.renewing.is_some()
    }

    /// How long a session lasts from now, if it expires: the mechanism's
    /// `connections.max.reauth.ms`, and at most until its credential expires (Kafka's
    /// rule; never zero, which would tell the client "never").
    pub fn lifetime(&self) -> Option<std::time::Duration> {
        let reauth_ms = self
            .mechanism
            .as_ref()
            .and_then(|m| self.config.reauth_ms_by_mechanism.get(m))
            .copied()
            .unwrap_or(self.config.reauth_ms);
        let reauth = u64::try_from(reauth_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(std::time::Duration::from_millis);
        let credential = self.credential_expires.map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        });
        let lifetime = match (reauth, credential) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        lifetime.map(|l| l.max(std::time::Duration::from_millis(1)))
    }

    /// The authenticated user, once there is one.
    pub fn principal(&self) -> Option<&str> {
        match &self.state {
            State::Done(user) => Some(user),
            _ => None,
        }
    }

    /// Whether the next frame is a bare token (after a SaslHandshake v0).
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            State::Authenticate { raw: true, .. }
                | State::Scram { raw: true, .. }
                | State::OAuthRefused { raw: true }
        )
    }

    /// A bare token after a SaslHandshake v0: `Some(reply)` (an empty token) when it
    /// authenticates, `None` when it does not (Kafka then closes the connection).
    pub fn authenticate_raw(
        &mut self,
        token: &[u8],
        scram: ScramLookup<'_>,
    ) -> Option<bytes::Bytes> {
        let request = SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::copy_from_slice(token));
        let (response, next) = self.authenticate(&request, scram);
        (next == Next::Continue && response.error_code == 0).then_some(response.auth_bytes)
    }

    /// SaslHandshake `version` (0: the tokens then come as bare frames).
    pub fn handshake(
        &mut self,
        request: &SaslHandshakeRequest,
        version: i16,
    ) -> (SaslHandshakeResponse, Next) {
        let enabled: Vec<StrBytes> = self
            .config
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
        if self.state != State::Handshake {
            return (
                response.with_error_code(ResponseError::IllegalSaslState.code()),
                Next::Close,
            );
        }
        let wanted = request.mechanism.as_str().to_ascii_uppercase();
        if !self.config.mechanisms.contains(&wanted) {
            return (
                response.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                Next::Close,
            );
        }
        // A re-authentication speaks SaslAuthenticate (v1 handshakes) and keeps its
        // mechanism.
        if let Some((_, mechanism)) = &self.renewing {
            if version == 0 || *mechanism != wanted {
                return (
                    response.with_error_code(ResponseError::IllegalSaslState.code()),
                    Next::Close,
                );
            }
        }
        self.mechanism = Some(wanted.clone());
        self.state = State::Authenticate {
            mechanism: wanted,
            raw: version == 0,
        };
        (response, Next::Continue)
    }

    /// One SaslAuthenticate; `scram` finds SCRAM credentials. A re-authentication
    /// that logs in as someone else is refused (SASL_AUTHENTICATION_FAILED).
    pub fn authenticate(
        &mut self,
        request: &SaslAuthenticateRequest,
        scram: ScramLookup<'_>,
    ) -> (SaslAuthenticateResponse, Next) {
        let answer = self.authenticate_step(request, scram);
        match (&self.renewing, &self.state) {
            (Some((before, _)), State::Done(now)) if before != now => {
                let message = format!(
                    "Cannot change principals during re-authentication from User:{before}: User:{now}"
                );
                self.state = State::Handshake;
                (
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                    Next::Close,
                )
            }
            _ => answer,
        }
    }

    fn authenticate_step(
        &mut self,
        request: &SaslAuthenticateRequest,
        scram: ScramLookup<'_>,
    ) -> (SaslAuthenticateResponse, Next) {
        let refuse = |code: ResponseError, message: &str| {
            (
                SaslAuthenticateResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_string()))),
                Next::Close,
            )
        };
        if let State::Scram { exchange, .. } = &mut self.state {
            return match exchange.finish(&request.auth_bytes) {
                Ok((user, server_final)) => {
                    self.state = State::Done(user);
                    (
                        SaslAuthenticateResponse::default()
                            .with_auth_bytes(bytes::Bytes::from(server_final)),
                        Next::Continue,
                    )
                }
                Err(why) => refuse(ResponseError::SaslAuthenticationFailed, &why),
            };
        }
        if let State::OAuthRefused { .. } = &self.state {
            // Whatever the client sends now (RFC 7628 wants a lone %x01), it failed.
            return refuse(
                ResponseError::SaslAuthenticationFailed,
                "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER",
            );
        }
        let State::Authenticate { mechanism, raw } = &self.state else {
            return refuse(
                ResponseError::IllegalSaslState,
                "SaslAuthenticate before a SaslHandshake chose a mechanism",
            );
        };
        if let Some(m) = ScramMechanism::from_name(mechanism) {
            let raw = *raw;
            let mut exchange = ScramServer::new(m);
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            return match exchange.first(&request.auth_bytes, scram, &nonce) {
                Ok(server_first) => {
                    self.state = State::Scram { exchange, raw };
                    (
                        SaslAuthenticateResponse::default()
                            .with_auth_bytes(bytes::Bytes::from(server_first)),
                        Next::Continue,
                    )
                }
                Err(why) => refuse(ResponseError::SaslAuthenticationFailed, &why),
            };
        }
        match mechanism.as_str() {
            "OAUTHBEARER" => {
                let raw = *raw;
                match self.oauth_user(&request.auth_bytes) {
                    Ok((user, expires)) => {
                        self.state = State::Done(user);
                        self.credential_expires = Some(expires);
                        (SaslAuthenticateResponse::default(), Next::Continue)
                    }
                    Err(why) => {
                        tracing::info!(reason = %why, "OAUTHBEARER token refused");
                        self.state = State::OAuthRefused { raw };
                        (
                            SaslAuthenticateResponse::default().with_auth_bytes(
                                bytes::Bytes::from_static(super::oauth::INVALID_TOKEN_CHALLENGE),
                            ),
                            Next::Continue,
                        )
                    }
                }
            }
            "PLAIN" => match plain_user(&request.auth_bytes, &self.config.plain_users) {
                Ok(user) => {
                    self.state = State::Done(user);
                    (SaslAuthenticateResponse::default(), Next::Continue)
                }
                Err(why) => refuse(
                    ResponseError::SaslAuthenticationFailed,
                    &format!("Authentication failed: {why}"),
                ),
            },
            other => refuse(
                ResponseError::UnsupportedSaslMechanism,
                &format!("mechanism {other} is not implemented"),
            ),
        }
    }
}

impl SaslSession {
    /// OAUTHBEARER's one message: the token's principal and expiry, or why not.
    fn oauth_user(&self, message: &[u8]) -> Result<(String, std::time::SystemTime), String> {
        let oauth = self
            .config
            .oauth
            .as_ref()
            .ok_or("OAUTHBEARER has no validator on this listener")?;
        let (authzid, token) = super::oauth::client_message(message)?;
        let t = oauth.validate(&token, std::time::SystemTime::now())?;
        if authzid.as_ref().is_some_and(|a| *a != t.principal) {
            return Err(format!(
                "the authorization id is not the token's principal {}",
                t.principal
            ));
        }
        Ok((t.principal, t.expires))
    }
}

/// PLAIN's one message, `[authzid] NUL authcid NUL passwd` (RFC 4616), checked against
/// `users`: the user it authenticates, or why not (Kafka's wording for a wrong name or
/// password, which does not tell the two apart).
pub fn plain_user(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, String> {
    let parts: Vec<&[u8]> = token.split(|b| *b == 0).collect();
    let [authzid, authcid, password] = parts[..] else {
        return Err("Invalid SASL/PLAIN response: expected 3 tokens".to_string());
    };
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| "Invalid SASL/PLAIN response: not UTF-8".to_string())
    };
    let (authzid, user, password) = (text(authzid)?, text(authcid)?, text(password)?);
    if user.is_empty() {
        return Err("Invalid SASL/PLAIN response: username not specified".to_string());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(
            "Authentication failed: Client requested an authorization id that is different from username"
                .to_string(),
        );
    }
    match users.get(&user) {
        Some(expected) if same_secret(expected.as_bytes(), password.as_bytes()) => Ok(user),
        _ => Err("Invalid username or password".to_string()),
    }
}

/// Compares secrets in time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The users of a PLAIN JAAS config
/// (`org.apache.kafka.common.security.plain.PlainLoginModule required
/// username="admin" password="pw" user_admin="pw" user_alice="pw2";`): its
/// `user_<name>="<password>"` options.
pub fn jaas_plain_users(jaas: &str) -> Result<BTreeMap<String, String>, String> {
    let (_, options) = jaas_options(jaas)?;
    Ok(options
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
        .collect())
}

/// A JAAS config's login module class and its quoted options
/// (`<LoginModule> <flag> key="value" ...;`).
pub fn jaas_options(jaas: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let mut out = BTreeMap::new();
    let expected = || "expected `<LoginModule> required <options>;`".to_string();
    let (module, rest) = jaas
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(expected)?;
    // The control flag (required, requisite, ...) comes next, then the options, if
    // any (`OAuthBearerLoginModule required;` has none).
    let rest = rest.trim_start();
    let flag_end = rest
        .find(|c: char| c.is_whitespace() || c == ';')
        .filter(|end| *end > 0)
        .ok_or_else(expected)?;
    let mut rest = rest[flag_end..].trim_start();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim();
        let after = after.trim_start();
        let value_start = after
            .strip_prefix('"')
            .ok_or_else(|| format!("the value of {key} is not quoted"))?;
        let (value, tail) = value_start
            .split_once('"')
            .ok_or_else(|| format!("the value of {key} has no closing quote"))?;
        out.insert(key.to_string(), value.to_string());
        rest = tail.trim_start();
        if rest.starts_with(';') {
            break;
        }
    }
    if !rest.starts_with(';') {
        return Err("expected `;` at the end".to_string());
    }
    Ok((module.to_string(), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SaslSession {
        SaslSession::new(Arc::new(SaslConfig {
            mechanisms: vec!["PLAIN".into()],
            plain_users: [
                ("alice".to_string(), "secret".to_string()),
                ("carol".to_string(), "carol-pw".to_string()),
            ]
            .into_iter()
            .collect(),
            reauth_ms: 0,
            ..SaslConfig::default()
        }))
    }

    #[test]
    fn oauthbearer_tokens_authenticate_or_get_the_invalid_token_challenge_then_fail() {
        use super::super::oauth::{
            initial_response, unsecured_token, OAuthConfig, OAuthValidator, CHALLENGE_ACK,
            INVALID_TOKEN_CHALLENGE,
        };
        use std::time::{Duration, SystemTime};
        let config = Arc::new(SaslConfig {
            mechanisms: vec!["OAUTHBEARER".into(), "PLAIN".into()],
            reauth_ms: 3_600_000,
            reauth_ms_by_mechanism: [("PLAIN".to_string(), 5_000)].into_iter().collect(),
            oauth: Some(Arc::new(OAuthConfig::new(OAuthValidator::Unsecured))),
            ..SaslConfig::default()
        });
        let token = unsecured_token("bob", SystemTime::now(), Duration::from_secs(60));
        let mut s = SaslSession::new(Arc::clone(&config));
        assert_eq!(handshake(&mut s, "OAUTHBEARER"), (0, Next::Continue));
        assert_eq!(
            authenticate(&mut s, &initial_response(&token)),
            (0, Next::Continue)
        );
        assert_eq!(s.principal(), Some("bob"));
        // The token's expiry, not the hour of connections.max.reauth.ms, ends it.
        let lifetime = s.lifetime().expect("expires");
        assert!(lifetime <= Duration::from_secs(60), "{lifetime:?}");
        assert!(lifetime > Duration::from_secs(50), "{lifetime:?}");
        // PLAIN's own limit wins over the listener's.
        let mut p = SaslSession::new(Arc::clone(&config));
        handshake(&mut p, "PLAIN");
        let (code, _) = authenticate(&mut p, b"\0x\0y");
        assert_ne!(code, 0, "PLAIN has no users here");
        p.mechanism = Some("PLAIN".into());
        assert_eq!(p.lifetime(), Some(Duration::from_secs(5)));
        // A bad token: the challenge without an error, then the failure.
        let mut s = SaslSession::new(Arc::clone(&config));
        handshake(&mut s, "OAUTHBEARER");
        let (r, next) = s.authenticate(
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from(initial_response("not.a.token"))),
            &no_scram_users,
        );
        assert_eq!((r.error_code, next), (0, Next::Continue));
        assert_eq!(&r.auth_bytes[..], INVALID_TOKEN_CHALLENGE);
        assert_eq!(s.principal(), None);
        assert_eq!(
            authenticate(&mut s, CHALLENGE_ACK),
            (ResponseError::SaslAuthenticationFailed.code(), Next::Close)
        );
        assert_eq!(s.principal(), None);
    }

    fn handshake(s: &mut SaslSession, mechanism: &str) -> (i16, Next) {
        let (r, next) = s.handshake(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_string(mechanism.into())),
            1,
        );
        (r.error_code, next)
    }

    fn authenticate(s: &mut SaslSession, token: &[u8]) -> (i16, Next) {
        let (r, next) = s.authenticate(
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::copy_from_slice(token)),
            &no_scram_users,
        );
        (r.error_code, next)
    }

    #[test]
    fn plain_authenticates_a_configured_user_once() {
        let mut s = session();
        assert_eq!(handshake(&mut s, "PLAIN"), (0, Next::Continue));
        assert_eq!(
            authenticate(&mut s, b"\0alice\0secret"),
            (0, Next::Continue)
        );
        assert_eq!(s.principal(), Some("alice"));
        // A second handshake on an authenticated connection is out of order.
        assert_eq!(
            handshake(&mut s, "PLAIN"),
            (ResponseError::IllegalSaslState.code(), Next::Close)
        );
    }

    #[test]
    fn a_renewal_must_log_in_the_same_user_with_the_same_mechanism() {
        let mut s = session();
        assert!(s.renewal().is_none(), "nothing to renew before a login");
        handshake(&mut s, "PLAIN");
        authenticate(&mut s, b"\0alice\0secret");
        let mut again = s.renewal().expect("authenticated");
        assert!(again.is_renewal() && again.principal().is_none());
        assert_eq!(handshake(&mut again, "PLAIN"), (0, Next::Continue));
        assert_eq!(
            authenticate(&mut again, b"\0alice\0secret"),
            (0, Next::Continue)
        );
        assert_eq!(again.principal(), Some("alice"));
        // Someone else's password is refused, though it is right for them.
        let mut other = s.renewal().expect("authenticated");
        handshake(&mut other, "PLAIN");
        assert_eq!(
            authenticate(&mut other, b"\0carol\0carol-pw"),
            (ResponseError::SaslAuthenticationFailed.code(), Next::Close)
        );
        assert_eq!(other.principal(), None);
        // A v0 handshake cannot renew a session.
        let mut raw = s.renewal().expect("authenticated");
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        let (response, next) = raw.handshake(&request, 0);
        assert_eq!(
            (response.error_code, next),
            (ResponseError::IllegalSaslState.code(), Next::Close)
        );
    }

    #[test]
    fn wrong_credentials_unknown_mechanisms_and_order_are_refused() {
        let mut s = session();
        assert_eq!(
            authenticate(&mut s, b"\0alice\0secret"),
            (ResponseError::IllegalSaslState.code(), Next::Close)
        );
        let mut s = session();
        assert_eq!(
            handshake(&mut s, "SCRAM-SHA-512"),
            (ResponseError::UnsupportedSaslMechanism.code(), Next::Close)
        );
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0secret",
            b"\0alice\0secre",
            b"alice\0secret",
            b"mallory\0alice\0secret",
            b"\0\0secret",
        ] {
            let mut s = session();
            handshake(&mut s, "plain");
            assert_eq!(
                authenticate(&mut s, bad),
                (ResponseError::SaslAuthenticationFailed.code(), Next::Close),
                "{bad:?}"
            );
            assert_eq!(s.principal(), None);
        }
        // The authorization id may repeat the user.
        let mut s = session();
        handshake(&mut s, "PLAIN");
        assert_eq!(authenticate(&mut s, b"alice\0alice\0secret").0, 0);
    }

    #[test]
    fn after_a_v0_handshake_the_token_comes_bare() {
        let mut s = session();
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        assert_eq!(s.handshake(&request, 0).1, Next::Continue);
        assert!(s.expects_raw_token());
        assert_eq!(
            s.authenticate_raw(b"\0alice\0secret", &no_scram_users),
            Some(bytes::Bytes::new())
        );
        assert_eq!(s.principal(), Some("alice"));
        let mut s = session();
        s.handshake(&request, 0);
        assert_eq!(s.authenticate_raw(b"\0alice\0nope", &no_scram_users), None);
        assert_eq!(s.principal(), None);
    }

    #[test]
    fn jaas_configs_give_their_users() {
        let users = jaas_plain_users(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a-pw" user_admin="a-pw" user_alice="x=y";"#,
        )
        .expect("parses");
        assert_eq!(users.len(), 2);
        assert_eq!(users["admin"], "a-pw");
        assert_eq!(users["alice"], "x=y");
        for bad in [
            "PlainLoginModule",
            r#"PlainLoginModule required user_a=pw;"#,
            r#"PlainLoginModule required user_a="pw""#,
            r#"PlainLoginModule required user_a="pw;"#,
        ] {
            assert!(jaas_plain_users(bad).is_err(), "{bad}");
        }
        // A module without options.
        let (module, options) = jaas_options(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        )
        .expect("no options");
        assert!(module.ends_with("OAuthBearerLoginModule"));
        assert!(options.is_empty());
        assert!(jaas_options("OAuthBearerLoginModule ;").is_err());
    }
}
