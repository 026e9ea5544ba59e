//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's KIP-84): the broker's
//! side of the two-round exchange, and the credentials it checks against (stored as
//! metadata records by AlterUserScramCredentials, never the password itself).
//!
//! Kafka's rules kept: no channel binding (`n,,` or `y,,` GS2 headers only), an
//! authorization id must equal the user, iterations within 4096..=16384, and every
//! refusal reads "Authentication failed during authentication due to invalid
//! credentials with SASL mechanism SCRAM-SHA-…", which does not tell an unknown user
//! from a wrong password.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's `ScramMechanism` (its codes are AlterUserScramCredentials' `Mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

/// Fewest iterations a credential may have (Kafka's minimum).
pub const MIN_ITERATIONS: i32 = 4096;
/// Most iterations a credential may have (Kafka's maximum).
pub const MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail here.
        match self {
            ScramMechanism::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            ScramMechanism::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)` (PBKDF2 with this HMAC, one block).
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        let mut block = salt.to_vec();
        block.extend_from_slice(&1u32.to_be_bytes());
        let mut u = self.hmac(password, &block);
        let mut out = u.clone();
        for _ in 1..iterations.max(1) {
            u = self.hmac(password, &u);
            out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
        }
        out
    }
}

/// What the broker keeps of a user's password for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }
}

/// Where one connection's SCRAM exchange is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramServer {
    /// Waiting for client-first-message.
    First(ScramMechanism),
    /// server-first-message sent; waiting for client-final-message.
    Final {
        mechanism: ScramMechanism,
        user: String,
        gs2_header: String,
        nonce: String,
        /// client-first-message-bare "," server-first-message.
        auth_prefix: String,
        credential: ScramCredential,
    },
}

/// A refused SCRAM message: the SaslAuthenticate error message.
pub type Refusal = String;

fn refusal(mechanism: ScramMechanism) -> Refusal {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    )
}

/// RFC 5802's `saslname`: `=2C` is a comma, `=3D` an equals sign, nothing else
/// after `=`.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer::First(mechanism)
    }

    fn mechanism(&self) -> ScramMechanism {
        match self {
            ScramServer::First(m) | ScramServer::Final { mechanism: m, .. } => *m,
        }
    }

    /// client-first-message -> server-first-message. `lookup` finds a user's
    /// credential for this mechanism; `server_nonce` is fresh randomness.
    pub fn first(
        &mut self,
        message: &[u8],
        lookup: impl Fn(&str, ScramMechanism) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<String, Refusal> {
        let ScramServer::First(mechanism) = *self else {
            return Err(refusal(self.mechanism()));
        };
        let fail = || {
            tracing::debug!("malformed SCRAM client-first-message");
            refusal(mechanism)
        };
        let text = std::str::from_utf8(message).map_err(|_| fail())?;
        // gs2-header: "n," or "y," (no channel binding), then an optional authzid.
        let (flag, rest) = text.split_once(',').ok_or_else(fail)?;
        if flag != "n" && flag != "y" {
            return Err(fail());
        }
        let (authzid, bare) = rest.split_once(',').ok_or_else(fail)?;
        let gs2_header = format!("{flag},{authzid},");
        let mut parts = bare.split(',');
        let user = parts
            .next()
            .and_then(|p| p.strip_prefix("n="))
            .and_then(decode_saslname)
            .filter(|u| !u.is_empty())
            .ok_or_else(fail)?;
        let client_nonce = parts
            .next()
            .and_then(|p| p.strip_prefix("r="))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b','))
            .ok_or_else(fail)?;
        // Extensions (Kafka's `tokenauth` for delegation tokens) are not supported.
        if parts.next().is_some() {
            return Err(fail());
        }
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if decode_saslname(authzid).as_deref() != Some(user.as_str()) {
                return Err(fail());
            }
        } else if !authzid.is_empty() {
            return Err(fail());
        }
        let Some(credential) = lookup(&user, mechanism) else {
            tracing::debug!(%user, mechanism = mechanism.name(), "no SCRAM credential for the user");
            return Err(fail());
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            base64::engine::general_purpose::STANDARD.encode(&credential.salt),
            credential.iterations
        );
        *self = ScramServer::Final {
            mechanism,
            user,
            gs2_header,
            nonce,
            auth_prefix: format!("{bare},{server_first}"),
            credential,
        };
        Ok(server_first)
    }

    /// client-final-message -> (the authenticated user, server-final-message).
    pub fn finish(&mut self, message: &[u8]) -> Result<(String, String), Refusal> {
        let ScramServer::Final {
            mechanism,
            user,
            gs2_header,
            nonce,
            auth_prefix,
            credential,
        } = self
        else {
            return Err(refusal(self.mechanism()));
        };
        let mechanism = *mechanism;
        let fail = || {
            tracing::debug!(user = %user, "malformed SCRAM client-final-message");
            refusal(mechanism)
        };
        let text = std::str::from_utf8(message).map_err(|_| fail())?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(fail)?;
        let mut parts = without_proof.split(',');
        let b64 = base64::engine::general_purpose::STANDARD;
        let binding = parts
            .next()
            .and_then(|p| p.strip_prefix("c="))
            .and_then(|c| b64.decode(c).ok())
            .ok_or_else(fail)?;
        if binding != gs2_header.as_bytes() {
            return Err(fail());
        }
        // Kafka accepts a client nonce that ends with the server's (librdkafka sends
        // its own nonce again in front of it), and so does Twinlog.
        if !parts
            .next()
            .and_then(|p| p.strip_prefix("r="))
            .is_some_and(|r| r.ends_with(nonce.as_str()))
        {
            return Err(fail());
        }
        let proof = b64.decode(proof).map_err(|_| fail())?;
        let auth_message = format!("{auth_prefix},{without_proof}");
        let signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(fail());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored = mechanism.hash(&client_key);
        let same = stored.len() == credential.stored_key.len()
            && stored
                .iter()
                .zip(&credential.stored_key)
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0;
        if !same {
            tracing::debug!(%user, mechanism = mechanism.name(), "SCRAM proof does not match the stored key");
            return Err(fail());
        }
        let server_signature = mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((user.clone(), format!("v={}", b64.encode(server_signature))))
    }
}

/// The client's side, for Twinlog's own connections (a mirror's source) and tests.
#[derive(Debug, Clone)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    user: String,
    password: String,
    client_nonce: String,
    /// Set by `final_message`: what the server's signature must be.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> ScramClient {
        ScramClient {
            mechanism,
            user: user.to_owned(),
            password: password.to_owned(),
            client_nonce: nonce.to_owned(),
            expected_server_signature: None,
        }
    }

    fn bare(&self) -> String {
        let user = self.user.replace('=', "=3D").replace(',', "=2C");
        format!("n={user},r={}", self.client_nonce)
    }

    pub fn first_message(&self) -> String {
        format!("n,,{}", self.bare())
    }

    /// server-first-message -> client-final-message.
    pub fn final_message(&mut self, server_first: &str) -> Result<String, String> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in server_first.split(',') {
            if let Some(v) = part.strip_prefix("r=") {
                nonce = Some(v.to_owned());
            } else if let Some(v) = part.strip_prefix("s=") {
                salt = base64::engine::general_purpose::STANDARD.decode(v).ok();
            } else if let Some(v) = part.strip_prefix("i=") {
                iterations = v.parse::<i32>().ok();
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(format!("malformed server-first-message {server_first:?}"));
        };
        if !nonce.starts_with(&self.client_nonce)
            || !(1..=MAX_ITERATIONS * 64).contains(&iterations)
        {
            return Err("the server's nonce or iteration count is invalid".into());
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.bare());
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!(
            "{without_proof},p={}",
            base64::engine::general_purpose::STANDARD.encode(proof)
        ))
    }

    /// Whether server-final-message proves the server knows the credential.
    pub fn verify_server(&self, server_final: &str) -> bool {
        let got = server_final
            .strip_prefix("v=")
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok());
        got.is_some() && got == self.expected_server_signature
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7677_sha256_test_vector() {
        // RFC 7677 section 3: user "user", password "pencil".
        let m = ScramMechanism::Sha256;
        let salt = base64::engine::general_purpose::STANDARD
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .expect("salt");
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted_password(m, &salt, &salted, 4096);
        let mut server = ScramServer::new(m);
        let first = server
            .first(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                |u, _| (u == "user").then(|| credential.clone()),
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .expect("first");
        assert_eq!(
            first,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, last) = server
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .expect("final");
        assert_eq!(user, "user");
        assert_eq!(last, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    #[test]
    fn client_and_server_agree_and_a_wrong_password_or_user_is_refused() {
        for m in ScramMechanism::ALL {
            let salt = b"0123456789abcdef";
            let credential = ScramCredential::from_salted_password(
                m,
                salt,
                &m.salted_password(b"right", salt, 4096),
                4096,
            );
            let lookup = |u: &str, mech| (u == "a,b=c" && mech == m).then(|| credential.clone());
            let run = |password: &str, user: &str| -> Result<(), String> {
                let mut client = ScramClient::new(m, user, password, "cnonce");
                let mut server = ScramServer::new(m);
                let first = server.first(client.first_message().as_bytes(), lookup, "snonce")?;
                let last = client.final_message(&first)?;
                let (who, done) = server.finish(last.as_bytes())?;
                assert_eq!(who, user);
                assert!(client.verify_server(&done));
                Ok(())
            };
            run("right", "a,b=c").expect("authenticates");
            let wrong = run("wrong", "a,b=c").expect_err("wrong password");
            assert!(wrong.contains(m.name()), "{wrong}");
            assert!(run("right", "nobody").is_err());
        }
    }

    #[test]
    fn malformed_and_unsupported_first_messages_are_refused() {
        let m = ScramMechanism::Sha512;
        let credential = ScramCredential::from_salted_password(m, b"s", b"p", 4096);
        for message in [
            &b"p=tls-unique,,n=u,r=x"[..],
            b"n,,n=u",
            b"n,,n=,r=x",
            b"n,,n=u,r=x,tokenauth=true",
            b"n,a=other,n=u,r=x",
            b"n,,n=u=41,r=x",
            b"\xff\xfe",
            b"",
        ] {
            let mut server = ScramServer::new(m);
            assert!(
                server
                    .first(message, |_, _| Some(credential.clone()), "s")
                    .is_err(),
                "{:?}",
                String::from_utf8_lossy(message)
            );
        }
        let mut server = ScramServer::new(m);
        server
            .first(b"n,a=u,n=u,r=x", |_, _| Some(credential.clone()), "s")
            .expect("an authzid equal to the user");
        assert!(server.finish(b"c=biws,r=xs").is_err(), "no proof");
        assert!(
            server.finish(b"c=eSws,r=xs,p=AAAA").is_err(),
            "another binding"
        );
    }
}
