//! The one entry from the transport into the handlers. `net` knows no handler: the wiring
//! (`run`, tests) builds a [`Dispatch`] (the broker's `api::Frontend`) and passes it to the listeners,
//! and each connection hands it every frame it reads, with the connection's [`Session`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;

use super::request::ServedLookup;
use super::response::Response;
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::security::Session;
use crate::security::sasl::authenticator::Credentials;

/// A request's answer: a response, none (Produce with acks=0), or an error that closes the
/// connection.
pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<Option<Response>>> + Send + 'a>>;

/// What a connection needs from the broker above it.
pub trait Dispatch: Send + Sync + 'static {
    /// Parses one request frame (after its size prefix) from the connection whose security
    /// state is `session` and runs its handler.
    fn dispatch<'a>(&'a self, frame: Bytes, session: &'a Session) -> Answer<'a>;
    /// The API keys and versions served (the SASL authenticator parses its own requests).
    fn served(&self) -> ServedLookup;
    /// The broker's configuration (listeners, frame bounds, SASL settings).
    fn config(&self) -> &BrokerConfig;
    /// The request and connection counters.
    fn metrics(&self) -> &Arc<Metrics>;
    /// The SCRAM credentials SASL logins are checked against.
    fn credentials(&self) -> Arc<dyn Credentials + Send + Sync>;
    /// Whether new connections are closed as they are accepted (a node that is down, by an
    /// injected fault).
    fn refuses_connections(&self) -> bool {
        false
    }
}
