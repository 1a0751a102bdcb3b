//! One connection to a leader broker, speaking Kafka's wire protocol as a client does: each
//! request is a frame (4-byte big-endian size, request header v1 or v2 as the API version
//! wants, the body encoded by kafka-protocol), answered in order by one response frame whose
//! header carries the request's correlation id.
//!
//! Nothing from the leader is trusted: a frame size outside (0, `max_frame`], a correlation
//! id that is not the request's, or a body that does not decode (the crate's decoder is run
//! under `catch_unwind`) is an error, and the caller then drops the connection.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct LeaderConn {
    stream: TcpStream,
    client_id: StrBytes,
    next_correlation: i32,
    /// The largest response frame accepted.
    max_frame: usize,
}

impl LeaderConn {
    /// Connects to `addr` (`host:port`).
    pub async fn connect(addr: &str, client_id: String, max_frame: usize) -> Result<LeaderConn> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connecting to {addr} timed out"))?
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(LeaderConn {
            stream,
            client_id: StrBytes::from_string(client_id),
            next_correlation: 0,
            max_frame,
        })
    }

    /// Sends `body` as API `key` at `version` and reads its response, waiting at most
    /// `timeout` for it.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let frame = encode_request(key, version, correlation_id, &self.client_id, body)?;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            read_frame(&mut self.stream, self.max_frame).await
        };
        let frame = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| anyhow!("no {key:?} response within {timeout:?}"))??;
        decode_response(key, version, correlation_id, frame)
    }
}

/// A request frame: size, header, body.
pub fn encode_request<Req: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body: &Req,
) -> Result<Bytes> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(client_id.clone());
    header.encode(&mut buf, key.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let size = i32::try_from(buf.len() - 4).context("request too large")?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Reads one frame (without its size) of at most `max_frame` bytes.
async fn read_frame(stream: &mut TcpStream, max_frame: usize) -> Result<Bytes> {
    let size = stream.read_i32().await.context("reading a response size")?;
    if size <= 0 || size as usize > max_frame {
        bail!("response frame of {size} bytes (limit {max_frame})");
    }
    let mut buf = BytesMut::zeroed(size as usize);
    stream
        .read_exact(&mut buf)
        .await
        .context("reading a response")?;
    Ok(buf.freeze())
}

/// Decodes a response frame to a request with `correlation_id`.
pub fn decode_response<Resp: Decodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    mut frame: Bytes,
) -> Result<Resp> {
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
        if header.correlation_id != correlation_id {
            bail!(
                "response for correlation id {} to request {correlation_id}",
                header.correlation_id
            );
        }
        Resp::decode(&mut frame, version)
    }));
    match decoded {
        Ok(r) => r.map_err(|e| anyhow!("malformed {key:?} v{version} response: {e}")),
        Err(_) => bail!("malformed {key:?} v{version} response (decoder panicked)"),
    }
}
