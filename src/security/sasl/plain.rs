//! SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it: `[authzid] NUL user NUL
//! password`, against the `user_<name>="<password>"` options of the listener's
//! PlainLoginModule JAAS entry. Pure.

use std::collections::BTreeMap;

use super::{AuthError, Step};

pub fn authenticate(token: &[u8], users: &BTreeMap<String, String>) -> Step {
    let Ok(msg) = std::str::from_utf8(token) else {
        return Step::Failure(AuthError::Credentials(
            "Invalid SASL/PLAIN response: not UTF-8".into(),
        ));
    };
    // Kafka reads three fields at NUL separators; missing ones are empty, text after a third
    // NUL is ignored.
    let mut parts = msg.splitn(4, '\0');
    let authz = parts.next().unwrap_or("");
    let user = parts.next().unwrap_or("");
    let password = parts.next().unwrap_or("");
    if user.is_empty() {
        return Step::Failure(AuthError::Credentials(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Step::Failure(AuthError::Credentials(
            "Authentication failed: password not specified".into(),
        ));
    }
    let ok = users.get(user).is_some_and(|p| {
        p.len() == password.len() && p.bytes().zip(password.bytes()).all(|(a, b)| a == b)
    });
    if !ok {
        return Step::Failure(AuthError::Client(
            "Authentication failed: Invalid username or password".into(),
        ));
    }
    if !authz.is_empty() && authz != user {
        return Step::Failure(AuthError::Client(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Step::Success {
        response: Vec::new(),
        authorization_id: user.to_string(),
        credential_expiry_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_checks_as_kafka() {
        let users: BTreeMap<String, String> = [("alice".to_string(), "s3cret".to_string())].into();
        assert!(matches!(
            authenticate(b"\0alice\0s3cret", &users),
            Step::Success { ref authorization_id, .. } if authorization_id == "alice"
        ));
        assert!(matches!(
            authenticate(b"alice\0alice\0s3cret", &users),
            Step::Success { .. }
        ));
        let fail = |t: &[u8]| match authenticate(t, &users) {
            Step::Failure(AuthError::Client(m)) | Step::Failure(AuthError::Credentials(m)) => m,
            _ => panic!("{t:?} passed"),
        };
        assert_eq!(
            fail(b"\0alice\0wrong"),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            fail(b"\0bob\0s3cret"),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            fail(b"\0\0x"),
            "Authentication failed: username not specified"
        );
        assert_eq!(
            fail(b"\0alice"),
            "Authentication failed: password not specified"
        );
        assert!(fail(b"bob\0alice\0s3cret").contains("different from username"));
        assert!(matches!(authenticate(b"", &users), Step::Failure(_)));
    }
}
