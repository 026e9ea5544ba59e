use super::*;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// An ES256 signing key with its JWK.
struct Signer {
    pkcs8: Vec<u8>,
    jwk: serde_json::Value,
}

impl Signer {
    fn new(kid: &str) -> Signer {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("key")
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).expect("pair");
        let point = pair.public_key().as_ref();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        });
        Signer { pkcs8, jwk }
    }

    fn token(&self, claims: serde_json::Value) -> String {
        let mut header = jsonwebtoken::Header::new(Algorithm::ES256);
        header.kid = self.jwk["kid"].as_str().map(str::to_owned);
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
        )
        .expect("sign")
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

fn jwks_file(dir: &std::path::Path, signers: &[&Signer]) -> String {
    let path = dir.join("jwks.json");
    let keys: Vec<_> = signers.iter().map(|s| s.jwk.clone()).collect();
    std::fs::write(&path, serde_json::json!({ "keys": keys }).to_string()).expect("jwks");
    format!("file://{}", path.display())
}

#[test]
fn jwks_tokens_are_checked_for_key_signature_expiry_audience_and_issuer() {
    let dir = tempfile::tempdir().expect("dir");
    let (k1, k2) = (Signer::new("k1"), Signer::new("k2"));
    let url = jwks_file(dir.path(), &[&k1]);
    let mut config = OAuthConfig::new(OAuthValidator::Jwks(Arc::new(
        JwksFile::open_checking_every(&url, Duration::ZERO).expect("open"),
    )));
    config.expected_audience = vec!["kafka".into()];
    config.expected_issuer = Some("https://idp.example".into());
    let now = SystemTime::now();
    let good = serde_json::json!({
        "sub": "alice", "aud": "kafka", "iss": "https://idp.example",
        "iat": now_s(), "exp": now_s() + 600,
    });
    let t = config
        .validate(&k1.token(good.clone()), now)
        .expect("valid");
    assert_eq!(t.principal, "alice");
    assert_eq!(
        t.expires.duration_since(UNIX_EPOCH).expect("t").as_secs(),
        now_s() + 600
    );
    let refused = |claims: serde_json::Value, signer: &Signer| {
        config
            .validate(&signer.token(claims), now)
            .expect_err("refused")
    };
    let with = |key: &str, value: serde_json::Value| {
        let mut c = good.clone();
        c[key] = value;
        c
    };
    assert!(refused(with("exp", (now_s() - 120).into()), &k1).contains("expired"));
    assert!(refused(with("aud", "other".into()), &k1).contains("audience"));
    assert!(refused(with("iss", "https://evil".into()), &k1).contains("issuer"));
    assert!(refused(with("nbf", (now_s() + 600).into()), &k1).contains("nbf"));
    assert!(refused(good.clone(), &k2).contains("no key `k2`"));
    // Signed by another key under k1's id.
    assert!(refused(good.clone(), &Signer::new("k1")).contains("signature"));
    // No principal claim.
    let mut anonymous = good.clone();
    anonymous.as_object_mut().expect("object").remove("sub");
    assert!(refused(anonymous, &k1).contains("`sub`"));
    // An unsigned token is never accepted by the JWKS validator.
    let unsigned = unsecured_token("alice", now, Duration::from_secs(60));
    assert!(config.validate(&unsigned, now).is_err());
    // The key set rotates: k2 in, k1 out, picked up without a restart.
    std::thread::sleep(Duration::from_millis(20));
    jwks_file(dir.path(), &[&k2]);
    assert_eq!(
        config
            .validate(&k2.token(good.clone()), now)
            .expect("rotated")
            .principal,
        "alice"
    );
    assert!(refused(good, &k1).contains("no key `k1`"));
}

#[test]
fn a_jwks_url_must_be_a_file_with_keys() {
    let dir = tempfile::tempdir().expect("dir");
    assert!(JwksFile::open("https://idp.example/keys")
        .expect_err("https")
        .contains("file:"));
    assert!(JwksFile::open("file:relative.json").is_err());
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"keys":[]}"#).expect("write");
    assert!(JwksFile::open(&format!("file://{}", empty.display()))
        .expect_err("empty")
        .contains("no keys"));
    std::fs::write(&empty, "not json").expect("write");
    assert!(JwksFile::open(&format!("file:{}", empty.display())).is_err());
}

#[test]
fn unsecured_tokens_need_alg_none_an_expiry_and_the_required_scopes() {
    let mut config = OAuthConfig::new(OAuthValidator::Unsecured);
    let now = SystemTime::now();
    let t = unsecured_token("bob", now, Duration::from_secs(60));
    assert_eq!(config.validate(&t, now).expect("valid").principal, "bob");
    let later = now + Duration::from_secs(600);
    assert!(config
        .validate(&t, later)
        .expect_err("expired")
        .contains("expired"));
    config.required_scopes = vec!["kafka".into()];
    assert!(config
        .validate(&t, now)
        .expect_err("scope")
        .contains("`kafka`"));
    let b64 = |v: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let scoped = format!(
        "{}.{}.",
        b64(serde_json::json!({"alg": "none"})),
        b64(serde_json::json!({"sub": "bob", "exp": now_s() + 60, "scope": "read kafka"}))
    );
    assert_eq!(
        config.validate(&scoped, now).expect("scoped").principal,
        "bob"
    );
    let signed_alg = format!(
        "{}.{}.",
        b64(serde_json::json!({"alg": "ES256"})),
        b64(serde_json::json!({"sub": "bob", "exp": now_s() + 60}))
    );
    assert!(config.validate(&signed_alg, now).is_err());
    assert!(config.validate("garbage", now).is_err());
}

#[test]
fn client_messages_parse_as_kafka_reads_them() {
    assert_eq!(
        client_message(&initial_response("a.b.c")).expect("plain"),
        (None, "a.b.c".to_owned())
    );
    assert_eq!(
        client_message(b"n,a=alice,\x01host=h\x01auth=bearer x-y_z.1\x01\x01").expect("ext"),
        (Some("alice".to_owned()), "x-y_z.1".to_owned())
    );
    for bad in [
        &b""[..],
        b"y,,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Basic t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01host=h\x01\x01",
        b"n,,\x01auth=Bearer t!\x01\x01",
        b"n,,\x01auth=Bearer \x01\x01",
        b"\xff\xfe",
    ] {
        assert!(client_message(bad).is_err(), "{bad:?}");
    }
}
