//! SASL authentication as Kafka's SaslServerAuthenticator runs it on a `SASL_PLAINTEXT` (or
//! `SASL_SSL`) listener. The mechanisms are pure state machines from client tokens to server
//! tokens ([`plain`], [`scram`], [`oauthbearer`]); [`authenticator`] is the per-connection
//! state machine over request frames (ApiVersions and SaslHandshake first, then
//! SaslAuthenticate until done, re-authentication and session expiry after); [`config`] reads
//! a listener's settings (`sasl.enabled.mechanisms`, the JAAS entries, the limits). Nothing
//! here does I/O: the connection feeds frames in and writes what comes out, so the same code
//! runs over any byte transport (plain TCP or TLS).

pub mod authenticator;
pub mod client;
pub mod config;
pub mod jaas;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

pub use authenticator::{Authenticator, Outcome};
pub use config::SaslListener;

/// A mechanism Sluice serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Plain,
    Scram(scram::ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            n => scram::ScramMechanism::from_name(n).map(Mechanism::Scram),
        }
    }
}

/// What a mechanism makes of one client token.
#[derive(Debug)]
pub enum Step {
    /// Send this to the client and wait for its next token.
    Challenge(Vec<u8>),
    /// Authenticated as `authorization_id`; `response` is the last server token. An expiring
    /// credential (an OAuth token) bounds the session (ms since the epoch).
    Success {
        response: Vec<u8>,
        authorization_id: String,
        credential_expiry_ms: Option<i64>,
    },
    Failure(AuthError),
}

/// Why an exchange failed, in Kafka's two kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// A SaslAuthenticationException: its message goes to the client.
    Client(String),
    /// A SaslException: the client gets Kafka's generic message (it may not learn, say, that
    /// the user does not exist); the detail is only logged.
    Credentials(String),
}
