//! SASL/OAUTHBEARER on a SASL listener (RFC 7628; Kafka's KIP-255 and KIP-768): the
//! client's one message carries a JWT (`auth=Bearer <token>`), which the broker
//! validates and maps to `User:<sub>`. Two validators, named by Kafka's callback
//! handler classes:
//!
//! - JWKS ([`OAuthValidator::Jwks`], Kafka's `OAuthBearerValidatorCallbackHandler`): a
//!   signed JWS (RS*, PS*, ES*, EdDSA) whose `kid` names a key of the JWKS file of
//!   `sasl.oauthbearer.jwks.endpoint.url` (a `file:` URL), checked for expiry (`exp`
//!   required, `nbf`), audience and issuer when configured, within
//!   `sasl.oauthbearer.clock.skew.seconds`. The file is read again when its length or
//!   modification time changes (looked at every [`JWKS_CHECK_INTERVAL`] at most), so a
//!   rotated key set needs no restart.
//! - Unsecured ([`OAuthValidator::Unsecured`], Kafka's
//!   `OAuthBearerUnsecuredValidatorCallbackHandler`, for tests only): an unsigned
//!   (`alg: none`) token, with expiry and the JAAS config's required scopes checked.
//!   Twinlog only uses it when the listener names that class: Kafka's silent default is
//!   not followed (ARCHITECTURE.md).
//!
//! A token that does not validate gets Kafka's answer: a challenge
//! `{"status":"invalid_token"}` with no error, then, once the client sent its `%x01`,
//! SASL_AUTHENTICATION_FAILED. The token's expiry bounds the session (KIP-368).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// Kafka's class names for the two validators
/// (`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`).
pub const JWKS_VALIDATOR_CLASS: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
pub const UNSECURED_VALIDATOR_CLASS: &str =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// How often a JWKS file's length and modification time are looked at, at most.
pub const JWKS_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// What an OAUTHBEARER listener accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    pub validator: OAuthValidator,
    /// The claim naming the principal (`sasl.oauthbearer.sub.claim.name`, or the
    /// unsecured validator's `unsecuredValidatorPrincipalClaimName`; default `sub`).
    pub principal_claim: String,
    /// The claim holding the scopes (`sasl.oauthbearer.scope.claim.name` /
    /// `unsecuredValidatorScopeClaimName`; default `scope`).
    pub scope_claim: String,
    /// Scopes a token must all have (`unsecuredValidatorRequiredScope`; unsecured only,
    /// as in Kafka).
    pub required_scopes: Vec<String>,
    /// `sasl.oauthbearer.expected.audience`: the token's `aud` must name one of them
    /// (empty: not checked).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`: the token's `iss` must be it.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.clock.skew.seconds` (default 30).
    pub clock_skew: Duration,
}

impl OAuthConfig {
    pub fn new(validator: OAuthValidator) -> OAuthConfig {
        OAuthConfig {
            validator,
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scopes: Vec::new(),
            expected_audience: Vec::new(),
            expected_issuer: None,
            clock_skew: Duration::from_secs(30),
        }
    }
}

/// How tokens are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthValidator {
    Jwks(Arc<JwksFile>),
    Unsecured,
}

/// A validated token: who it names and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthToken {
    pub principal: String,
    pub expires: SystemTime,
}

/// A JWKS file, loaded at start and again when it changes.
pub struct JwksFile {
    path: PathBuf,
    /// How often the file's length and modification time are looked at, at most.
    interval: Duration,
    loaded: Mutex<Loaded>,
}

struct Loaded {
    keys: Arc<JwkSet>,
    stamp: (u64, Option<SystemTime>),
    checked: Instant,
}

impl std::fmt::Debug for JwksFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksFile")
            .field("path", &self.path)
            .finish()
    }
}

impl PartialEq for JwksFile {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for JwksFile {}

impl JwksFile {
    /// The JWKS at `url` (`file:/path` or `file:///path`); a file that does not load
    /// is an error, so that a broker does not start with it.
    pub fn open(url: &str) -> Result<JwksFile, String> {
        JwksFile::open_checking_every(url, JWKS_CHECK_INTERVAL)
    }

    /// [`JwksFile::open`], looking for changes every `interval`.
    pub fn open_checking_every(url: &str, interval: Duration) -> Result<JwksFile, String> {
        let path = file_url_path(url)?;
        let (keys, stamp) = read_jwks(&path)?;
        Ok(JwksFile {
            path,
            interval,
            loaded: Mutex::new(Loaded {
                keys: Arc::new(keys),
                stamp,
                checked: Instant::now(),
            }),
        })
    }

    /// The key set, read again if the file changed. A file that no longer loads is
    /// logged and the keys loaded before stay in use.
    pub fn keys(&self) -> Arc<JwkSet> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.checked.elapsed() >= self.interval {
            loaded.checked = Instant::now();
            if stamp_of(&self.path) != loaded.stamp {
                match read_jwks(&self.path) {
                    Ok((keys, stamp)) => {
                        tracing::info!(path = %self.path.display(), keys = keys.keys.len(), "JWKS reloaded");
                        loaded.keys = Arc::new(keys);
                        loaded.stamp = stamp;
                    }
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), error = %e, "JWKS not reloaded; the keys loaded before stay in use")
                    }
                }
            }
        }
        Arc::clone(&loaded.keys)
    }
}

/// The path of a `file:` URL.
fn file_url_path(url: &str) -> Result<PathBuf, String> {
    let rest = url.trim().strip_prefix("file:").ok_or_else(|| {
        format!("`{url}`: Twinlog reads the JWKS from a file: URL (file:///path/jwks.json); fetch an https endpoint's keys into that file")
    })?;
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(format!("`{url}`: a file: URL needs an absolute path"));
    }
    Ok(PathBuf::from(path))
}

fn stamp_of(path: &std::path::Path) -> (u64, Option<SystemTime>) {
    std::fs::metadata(path).map_or((0, None), |m| (m.len(), m.modified().ok()))
}

fn read_jwks(path: &std::path::Path) -> Result<(JwkSet, (u64, Option<SystemTime>)), String> {
    let stamp = stamp_of(path);
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading the JWKS {}: {e}", path.display()))?;
    let keys: JwkSet = serde_json::from_str(&text)
        .map_err(|e| format!("the JWKS {} is not a JSON key set: {e}", path.display()))?;
    if keys.keys.is_empty() {
        return Err(format!("the JWKS {} has no keys", path.display()));
    }
    Ok((keys, stamp))
}

/// The asymmetric algorithms a JWKS token may be signed with (never `none`, never an
/// HMAC: a shared secret has no place in a public key set).
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl OAuthConfig {
    /// Validates a compact JWT at `now`.
    pub fn validate(&self, token: &str, now: SystemTime) -> Result<OAuthToken, String> {
        let claims = match &self.validator {
            OAuthValidator::Jwks(jwks) => self.verified_claims(token, &jwks.keys())?,
            OAuthValidator::Unsecured => self.unsecured_claims(token, now)?,
        };
        let principal = claims
            .get(&self.principal_claim)
            .and_then(|v| v.as_str())
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                format!(
                    "the token has no `{}` claim naming the principal",
                    self.principal_claim
                )
            })?
            .to_owned();
        let exp = claims
            .get("exp")
            .and_then(serde_json::Value::as_f64)
            .ok_or("the token has no numeric `exp` claim")?;
        let expires = UNIX_EPOCH + Duration::from_secs_f64(exp.max(0.0));
        if !self.required_scopes.is_empty() {
            let scopes = scopes_of(claims.get(&self.scope_claim));
            if let Some(missing) = self.required_scopes.iter().find(|s| !scopes.contains(s)) {
                return Err(format!("the token lacks the required scope `{missing}`"));
            }
        }
        Ok(OAuthToken { principal, expires })
    }

    fn verified_claims(
        &self,
        token: &str,
        keys: &JwkSet,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(format!(
                "tokens signed with {:?} are not accepted",
                header.alg
            ));
        }
        let jwk = match &header.kid {
            Some(kid) => keys
                .find(kid)
                .ok_or_else(|| format!("no key `{kid}` in the JWKS"))?,
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return Err("the token names no key (kid) and the JWKS has several".into()),
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("the JWKS key: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.clock_skew.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        if self.expected_audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.expected_audience);
        }
        if let Some(issuer) = &self.expected_issuer {
            validation.set_issuer(&[issuer]);
        }
        jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => "the token has expired".into(),
                jsonwebtoken::errors::ErrorKind::InvalidSignature => {
                    "the token's signature does not verify".into()
                }
                jsonwebtoken::errors::ErrorKind::InvalidAudience => {
                    "the token is not for this audience".into()
                }
                jsonwebtoken::errors::ErrorKind::InvalidIssuer => {
                    "the token is from another issuer".into()
                }
                jsonwebtoken::errors::ErrorKind::ImmatureSignature => {
                    "the token is not valid yet (nbf)".into()
                }
                _ => format!("invalid token: {e}"),
            })
    }

    fn unsecured_claims(
        &self,
        token: &str,
        now: SystemTime,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        let parts: Vec<&str> = token.split('.').collect();
        let [header, payload, signature] = parts[..] else {
            return Err("malformed token: expected header.payload.signature".into());
        };
        let json = |part: &str| -> Result<serde_json::Map<String, serde_json::Value>, String> {
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(part.trim_end_matches('='))
                .map_err(|e| format!("malformed token: {e}"))?;
            serde_json::from_slice(&bytes).map_err(|e| format!("malformed token: {e}"))
        };
        let alg = json(header)?
            .get("alg")
            .and_then(|a| a.as_str())
            .map(str::to_owned);
        if alg.as_deref() != Some("none") || !signature.is_empty() {
            return Err("the unsecured validator takes only unsigned tokens (alg none)".into());
        }
        let claims = json(payload)?;
        let now = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let skew = self.clock_skew.as_secs_f64();
        let time = |name: &str| claims.get(name).and_then(serde_json::Value::as_f64);
        match time("exp") {
            None => return Err("the token has no numeric `exp` claim".into()),
            Some(exp) if exp + skew < now => return Err("the token has expired".into()),
            Some(_) => {}
        }
        if time("nbf").is_some_and(|nbf| nbf - skew > now) {
            return Err("the token is not valid yet (nbf)".into());
        }
        Ok(claims)
    }
}

/// The scopes of a scope claim: a space-separated string or a list of strings.
fn scopes_of(claim: Option<&serde_json::Value>) -> Vec<String> {
    match claim {
        Some(serde_json::Value::String(s)) => s.split(' ').map(str::to_owned).collect(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The client's first message (RFC 7628 §3.1, as Kafka's
/// `OAuthBearerClientInitialResponse` reads it):
/// `n,[a=<authzid>],\x01auth=Bearer <token>\x01[key=value\x01]*\x01`. Returns the
/// authorization id, if any, and the token.
pub fn client_message(message: &[u8]) -> Result<(Option<String>, String), String> {
    let text = std::str::from_utf8(message).map_err(|_| "the message is not UTF-8")?;
    let rest = text
        .strip_prefix("n,")
        .ok_or("the message does not start with the GS2 header `n,`")?;
    let (authzid, rest) = rest
        .split_once(',')
        .ok_or("the GS2 header is not closed by `,`")?;
    let authzid = match authzid {
        "" => None,
        a => Some(
            a.strip_prefix("a=")
                .ok_or("the GS2 header's authorization id is not `a=...`")?
                .to_owned(),
        ),
    };
    let pairs = rest
        .strip_prefix('\u{1}')
        .and_then(|r| r.strip_suffix("\u{1}\u{1}"))
        .ok_or("the key-value pairs are not framed by %x01")?;
    let mut token = None;
    for pair in pairs.split('\u{1}') {
        let (key, value) = pair.split_once('=').ok_or("a key-value pair has no `=`")?;
        if key == "auth" {
            let (scheme, t) = value
                .split_once(' ')
                .ok_or("the auth value is not `Bearer <token>`")?;
            let t = t.trim_start_matches(' ');
            if !scheme.eq_ignore_ascii_case("bearer")
                || t.is_empty()
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                return Err("the auth value is not `Bearer <token>`".into());
            }
            token = Some(t.to_owned());
        }
    }
    let token = token.ok_or("the message has no auth=Bearer <token>")?;
    Ok((authzid, token))
}

/// The challenge sent for a token that does not validate (RFC 7628 §3.2.2).
pub const INVALID_TOKEN_CHALLENGE: &[u8] = br#"{"status":"invalid_token"}"#;

/// The client's answer to a challenge: a single %x01.
pub const CHALLENGE_ACK: &[u8] = &[1];

/// A client's first message for `token` (Twinlog's own client, and tests).
pub fn initial_response(token: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
}

/// An unsigned (`alg: none`) token naming `principal`, valid for `lifetime` from `now`
/// (Kafka's `unsecuredLoginStringClaim_sub`, for the unsecured validator only).
pub fn unsecured_token(principal: &str, now: SystemTime, lifetime: Duration) -> String {
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
    };
    let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let header = serde_json::json!({ "alg": "none" });
    let claims = serde_json::json!({
        "sub": principal,
        "iat": iat,
        "exp": iat + lifetime.as_secs().max(1),
    });
    format!("{}.{}.", b64(&header), b64(&claims))
}

#[cfg(test)]
mod tests;
