use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;
use crate::security::sasl::oauthbearer::UnsecuredOptions;

struct NoScram;
impl Credentials for NoScram {
    fn scram(&self, _: &str, _: ScramMechanism) -> Option<ScramCredential> {
        None
    }
}

fn cfg(max_reauth_ms: i64) -> Arc<SaslListener> {
    Arc::new(SaslListener {
        listener: "SASL_PLAINTEXT".into(),
        mechanisms: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha256)],
        plain_users: BTreeMap::from([("alice".into(), "pw".into()), ("bob".into(), "pw".into())]),
        oauth: UnsecuredOptions::default(),
        max_reauth_ms,
        failed_auth_delay_ms: 100,
        max_receive_size: 524288,
    })
}

fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let mut b = BytesMut::new();
    let mut h = RequestHeader::default();
    h.request_api_key = key as i16;
    h.request_api_version = version;
    h.correlation_id = 7;
    h.client_id = Some(StrBytes::from_static_str("t"));
    h.encode(&mut b, key.request_header_version(version))
        .unwrap();
    body.encode(&mut b, version).unwrap();
    b.freeze()
}

fn handshake(mech: &str, version: i16) -> Bytes {
    let mut r = SaslHandshakeRequest::default();
    r.mechanism = StrBytes::from_string(mech.into());
    frame(ApiKey::SaslHandshake, version, &r)
}

fn authenticate(token: &[u8], version: i16) -> Bytes {
    let mut r = SaslAuthenticateRequest::default();
    r.auth_bytes = Bytes::copy_from_slice(token);
    frame(ApiKey::SaslAuthenticate, version, &r)
}

/// The body of a response frame (after the size and the header).
fn body<T: Decodable>(r: &Response, key: ApiKey, version: i16) -> T {
    let bytes = r.to_vec().unwrap();
    let mut b = Bytes::from(bytes[4..].to_vec());
    kafka_protocol::messages::ResponseHeader::decode(&mut b, key.response_header_version(version))
        .unwrap();
    T::decode(&mut b, version).unwrap()
}

fn run(a: &mut Authenticator, f: &Bytes, now: i64) -> Outcome {
    a.on_frame(f, now, &NoScram, &mut || "nonce".to_string())
}

fn metadata() -> Bytes {
    frame(ApiKey::Metadata, 12, &MetadataRequest::default())
}

#[test]
fn plain_then_requests_then_session_expiry_and_reauth() {
    let mut a = Authenticator::new(cfg(1000), crate::api::served);
    let versions = frame(
        ApiKey::ApiVersions,
        3,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    assert!(matches!(run(&mut a, &versions, 0), Outcome::Serve));
    let Outcome::Reply(r) = run(&mut a, &handshake("PLAIN", 1), 0) else {
        panic!("handshake refused")
    };
    let h: SaslHandshakeResponse = body(&r, ApiKey::SaslHandshake, 1);
    assert_eq!(h.error_code, 0);
    assert_eq!(h.mechanisms.len(), 2);
    assert!(a.authenticating());
    let Outcome::Authenticated { reply, principal } =
        run(&mut a, &authenticate(b"\0alice\0pw", 2), 10)
    else {
        panic!("not authenticated")
    };
    assert_eq!(principal.to_string(), "User:alice");
    let r: SaslAuthenticateResponse = body(&reply, ApiKey::SaslAuthenticate, 2);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1000));
    assert!(!a.authenticating());
    assert!(matches!(run(&mut a, &metadata(), 500), Outcome::Serve));
    // Re-authentication before expiry, same principal.
    assert!(matches!(
        run(&mut a, &handshake("PLAIN", 1), 900),
        Outcome::Reply(_)
    ));
    assert!(matches!(
        run(&mut a, &authenticate(b"\0alice\0pw", 2), 950),
        Outcome::Authenticated { .. }
    ));
    assert!(matches!(run(&mut a, &metadata(), 1900), Outcome::Serve));
    assert!(matches!(run(&mut a, &metadata(), 1950), Outcome::Close(_)));
}

#[test]
fn reauth_cannot_change_principal_or_mechanism() {
    let mut a = Authenticator::new(cfg(1000), crate::api::served);
    run(&mut a, &handshake("PLAIN", 1), 0);
    run(&mut a, &authenticate(b"\0alice\0pw", 1), 0);
    run(&mut a, &handshake("PLAIN", 1), 10);
    let Outcome::Fail { reply: Some(r), .. } = run(&mut a, &authenticate(b"\0bob\0pw", 1), 10)
    else {
        panic!("principal changed")
    };
    let r: SaslAuthenticateResponse = body(&r, ApiKey::SaslAuthenticate, 1);
    assert_eq!(
        r.error_message.unwrap().as_str(),
        "Cannot change principals during re-authentication from User.alice: User.bob"
    );
    let mut a = Authenticator::new(cfg(1000), crate::api::served);
    run(&mut a, &handshake("PLAIN", 1), 0);
    run(&mut a, &authenticate(b"\0alice\0pw", 1), 0);
    assert!(matches!(
        run(&mut a, &handshake("SCRAM-SHA-256", 1), 10),
        Outcome::Reply(_)
    ));
    assert!(matches!(
        run(&mut a, &authenticate(b"n,,n=alice,r=x", 1), 10),
        Outcome::Fail { .. }
    ));
}

#[test]
fn failures_answer_with_kafka_messages() {
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    run(&mut a, &handshake("PLAIN", 1), 0);
    let Outcome::Fail { reply: Some(r), .. } = run(&mut a, &authenticate(b"\0alice\0no", 1), 0)
    else {
        panic!("wrong password accepted")
    };
    let r: SaslAuthenticateResponse = body(&r, ApiKey::SaslAuthenticate, 1);
    assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
    assert_eq!(
        r.error_message.unwrap().as_str(),
        "Authentication failed: Invalid username or password"
    );

    let mut a = Authenticator::new(cfg(0), crate::api::served);
    run(&mut a, &handshake("SCRAM-SHA-256", 1), 0);
    let Outcome::Fail { reply: Some(r), .. } =
        run(&mut a, &authenticate(b"n,,n=nobody,r=abc", 1), 0)
    else {
        panic!("unknown user accepted")
    };
    let r: SaslAuthenticateResponse = body(&r, ApiKey::SaslAuthenticate, 1);
    assert_eq!(
        r.error_message.unwrap().as_str(),
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    );

    let mut a = Authenticator::new(cfg(0), crate::api::served);
    let Outcome::Fail { reply: Some(r), .. } = run(&mut a, &handshake("GSSAPI", 1), 0) else {
        panic!("GSSAPI accepted")
    };
    let h: SaslHandshakeResponse = body(&r, ApiKey::SaslHandshake, 1);
    assert_eq!(h.error_code, ResponseError::UnsupportedSaslMechanism.code());
    assert_eq!(h.mechanisms[0].as_str(), "PLAIN");
}

#[test]
fn other_requests_and_garbage_close_the_connection() {
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    assert!(matches!(run(&mut a, &metadata(), 0), Outcome::Close(_)));
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    assert!(matches!(
        run(&mut a, &Bytes::from_static(b"\x60\x00garbage"), 0),
        Outcome::Close(_)
    ));
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    assert!(matches!(run(&mut a, &Bytes::new(), 0), Outcome::Close(_)));
    run(&mut a, &handshake("PLAIN", 1), 0);
    assert!(matches!(run(&mut a, &metadata(), 0), Outcome::Close(_)));
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    run(&mut a, &handshake("PLAIN", 1), 0);
    let truncated = authenticate(b"\0alice\0pw", 1);
    let truncated = truncated.slice(..truncated.len() - 4);
    assert!(matches!(run(&mut a, &truncated, 0), Outcome::Close(_)));
}

#[test]
fn handshake_v0_takes_bare_tokens() {
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    assert!(matches!(
        run(&mut a, &handshake("PLAIN", 0), 0),
        Outcome::Reply(_)
    ));
    let Outcome::Authenticated { reply, .. } = run(&mut a, &Bytes::from_static(b"\0alice\0pw"), 0)
    else {
        panic!("not authenticated")
    };
    assert_eq!(reply.to_vec().unwrap(), vec![0, 0, 0, 0]);
    let mut a = Authenticator::new(cfg(0), crate::api::served);
    run(&mut a, &handshake("PLAIN", 0), 0);
    assert!(matches!(
        run(&mut a, &Bytes::from_static(b"\0alice\0bad"), 0),
        Outcome::Fail { reply: None, .. }
    ));
}
