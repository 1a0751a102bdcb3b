//! Kafka requests made on behalf of a console user: encoded as a client would encode them
//! and run through the broker's own dispatch with the user's [`Session`], so the console
//! sees exactly what a client with that principal would (same checks, same errors).

use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::broker::Broker;
use crate::cluster::fetcher::conn::{decode_response, encode_request};
use crate::security::Session;

/// The client id the console's requests carry (it appears in the request log and metrics).
const CLIENT_ID: &str = "sluice-console";

/// Sends `req` as `key` v`version` and decodes the answer.
pub async fn call<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    session: &Session,
    key: ApiKey,
    version: i16,
    req: &Req,
) -> Result<Resp> {
    let client_id = StrBytes::from_static_str(CLIENT_ID);
    let frame = encode_request(key, version, 1, &client_id, req)?;
    // The connection hands dispatch the frame without its size prefix.
    let frame = frame.slice(4..);
    let resp = crate::api::dispatch_from(broker, frame, session)
        .await?
        .ok_or_else(|| anyhow!("no {key:?} response"))?;
    let bytes = resp
        .to_vec()
        .with_context(|| format!("reading the {key:?} response"))?;
    let body = bytes::Bytes::from(bytes).slice(4..);
    decode_response(key, version, 1, body)
}

pub use crate::metrics::error_name;
