//! Who is asking: the identity a connection has once its listener's security protocol has run
//! (TLS client certificate, SASL exchange, or nothing), carried on every request so the
//! authorizer and the quotas can judge it. The connection owns its [`Session`]; each request
//! gets a shared handle on the principal as it stood when the request was read.

pub mod acl;
pub mod sasl;
pub mod scram_store;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// A Kafka principal, written `type:name` ("User:alice"). Kafka's default principal builder
/// gives `User:ANONYMOUS` on PLAINTEXT listeners, the SASL authorization id after SASL, and the
/// mapped certificate subject after TLS client authentication.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub principal_type: String,
    pub name: String,
}

impl Principal {
    pub const USER: &'static str = "User";

    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            principal_type: Self::USER.to_string(),
            name: name.into(),
        }
    }

    /// The principal of an unauthenticated connection.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    /// Parses `type:name` as kafka-acls and `super.users` write it; the name may contain ':'.
    pub fn parse(s: &str) -> Option<Principal> {
        let (t, n) = s.split_once(':')?;
        if t.is_empty() {
            return None;
        }
        Some(Principal {
            principal_type: t.to_string(),
            name: n.to_string(),
        })
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// One connection's security state, owned by its connection task.
#[derive(Debug, Clone)]
pub struct Session {
    /// The client's address (None for synthetic requests: tests, fuzzing).
    pub peer: Option<SocketAddr>,
    /// The listener the connection came in on ("PLAINTEXT", "SASL_SSL", ...).
    pub listener: Arc<str>,
    pub principal: Arc<Principal>,
}

impl Session {
    pub fn anonymous(peer: Option<SocketAddr>, listener: &str) -> Session {
        Session {
            peer,
            listener: Arc::from(listener),
            principal: Arc::new(Principal::anonymous()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Principal;

    #[test]
    fn principals_print_and_parse_as_kafka_writes_them() {
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        let p = Principal::parse("User:CN=a,O=b:c").unwrap();
        assert_eq!(p.principal_type, "User");
        assert_eq!(p.name, "CN=a,O=b:c");
        assert_eq!(Principal::parse("alice"), None);
        assert_eq!(Principal::parse(":x"), None);
    }
}
