//! The console's authentication: when any Kafka listener uses SASL, every console request
//! carries HTTP Basic credentials (RFC 7617) that are checked against the same users a
//! Kafka client authenticates as: PLAIN's users from the listeners' JAAS entries, and SCRAM
//! users by deriving the stored key from the password with the stored salt and iterations
//! and comparing it with the one the broker keeps. The user's principal (`User:<name>`) is
//! then the principal of the console's Kafka requests.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::broker::Broker;
use crate::security::sasl::Mechanism;
use crate::security::sasl::scram::{ScramCredential, ScramMechanism};

/// The `WWW-Authenticate` challenge of a 401.
pub const CHALLENGE: &str = "Basic realm=\"Sluice console\", charset=\"UTF-8\"";

/// User and password from an `Authorization: Basic ...` header value.
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

/// Whether the console asks for credentials: some listener uses SASL.
pub fn required(broker: &Broker) -> bool {
    !broker.config.sasl.is_empty()
}

/// SCRAM checks derive a key (PBKDF2, thousands of rounds): a password that passed is
/// remembered by its hash with the stored key it matched, and a later request passes at
/// once while the broker still holds that stored key (a changed or deleted credential
/// makes it fail the full check again).
#[derive(Default)]
pub struct Verified {
    seen: Mutex<HashMap<PasswordOf, Matched>>,
}

/// A user and the SHA-256 of a password.
type PasswordOf = (String, [u8; 32]);
/// The mechanism and stored key a password matched.
type Matched = (ScramMechanism, Vec<u8>);

/// The most remembered passwords; the memory is emptied when it is full.
const REMEMBERED: usize = 256;

impl Verified {
    /// Whether `user` with `password` is one of the broker's SASL users.
    pub fn check(&self, broker: &Broker, user: &str, password: &str) -> bool {
        let plain = broker.config.sasl.values().any(|l| {
            l.mechanisms.contains(&Mechanism::Plain)
                && l.plain_users
                    .get(user)
                    .is_some_and(|p| same(p.as_bytes(), password.as_bytes()))
        });
        if plain {
            return true;
        }
        let scram_on = broker.config.sasl.values().any(|l| {
            l.mechanisms
                .iter()
                .any(|m| matches!(m, Mechanism::Scram(_)))
        });
        if !scram_on {
            return false;
        }
        let key = (user.to_string(), Sha256::digest(password.as_bytes()).into());
        let store = &broker.controller.scram;
        if let Ok(seen) = self.seen.lock()
            && let Some((mech, stored)) = seen.get(&key)
            && store
                .get(user, *mech)
                .is_some_and(|c| c.stored_key == *stored)
        {
            return true;
        }
        for mech in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let Some(cred) = store.get(user, mech) else {
                continue;
            };
            if scram_matches(mech, &cred, password) {
                if let Ok(mut seen) = self.seen.lock() {
                    if seen.len() >= REMEMBERED {
                        seen.clear();
                    }
                    seen.insert(key, (mech, cred.stored_key.clone()));
                }
                return true;
            }
        }
        false
    }
}

/// Whether `password` derives `cred`'s stored key.
pub fn scram_matches(mech: ScramMechanism, cred: &ScramCredential, password: &str) -> bool {
    let derived = ScramCredential::from_password(mech, password, &cred.salt, cred.iterations);
    same(&derived.stored_key, &cred.stored_key)
}

/// Equality that takes the same time wherever the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read() {
        // "alice:s3cr:et" in base64
        let h = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et")
        );
        assert_eq!(parse_basic(&h), Some(("alice".into(), "s3cr:et".into())));
        assert_eq!(parse_basic("Bearer abc"), None);
        assert_eq!(parse_basic("Basic !!!"), None);
        assert_eq!(
            parse_basic(&format!(
                "basic {}",
                base64::engine::general_purpose::STANDARD.encode("nocolon")
            )),
            None
        );
    }

    #[test]
    fn scram_passwords_are_checked_against_the_stored_key() {
        let mech = ScramMechanism::Sha256;
        let cred = ScramCredential::from_password(mech, "pw", b"salt", 4096);
        assert!(scram_matches(mech, &cred, "pw"));
        assert!(!scram_matches(mech, &cred, "pw2"));
        assert!(same(b"ab", b"ab") && !same(b"ab", b"ac") && !same(b"a", b"ab"));
    }
}
