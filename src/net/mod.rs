//! Networking: listeners, connections, framing, and response writing (bytes + sendfile).

pub mod client;
pub mod connection;
pub mod dispatch;
pub mod gate;
pub mod records;
pub mod request;
pub mod response;
pub mod sasl;
pub mod server;
pub mod tls;
