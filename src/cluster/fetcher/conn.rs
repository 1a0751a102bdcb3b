//! One connection to a leader broker, speaking Kafka's wire protocol as a client does: each
//! request is a frame (4-byte big-endian size, request header v1 or v2 as the API version
//! wants, the body encoded by kafka-protocol), answered in order by one response frame whose
//! header carries the request's correlation id.
//!
//! The byte stream comes from the broker's inter-broker security
//! ([`crate::net::client::InterBroker`]): plain TCP or TLS, and on a SASL listener the
//! connection logs in first (SaslHandshake v1, then SaslAuthenticate v2 until the mechanism is
//! done), as Kafka's broker does before its first request. A session the leader bounds
//! (`connections.max.reauth.ms`, KIP-368) is renewed on the same connection before it ends:
//! at 85% of its lifetime the next request is preceded by a new login.
//!
//! Nothing from the leader is trusted: a frame size outside (0, `max_frame`], a correlation
//! id that is not the request's, or a body that does not decode (the crate's decoder is run
//! under `catch_unwind`) is an error, and the caller then drops the connection.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::net::client::{InterBroker, Transport};
use crate::security::sasl::client::ClientLogin;

/// How long the SASL login may take, all its round trips together.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The most SaslAuthenticate round trips a login may take (SCRAM takes two).
const LOGIN_ROUNDS: usize = 4;

pub struct LeaderConn {
    stream: Box<dyn Transport>,
    client_id: StrBytes,
    next_correlation: i32,
    /// The largest response frame accepted.
    max_frame: usize,
    /// The SASL login, and when the session must be renewed (None: it does not expire).
    login: Option<(ClientLogin, Option<Instant>)>,
}

impl LeaderConn {
    /// Connects to broker `peer` at `addr` (`host:port`) with the inter-broker `security`,
    /// logged in when it has a SASL login.
    pub async fn connect(
        peer: i32,
        addr: &str,
        client_id: String,
        max_frame: usize,
        security: &InterBroker,
    ) -> Result<LeaderConn> {
        let stream = security.open(peer, addr).await?;
        let mut conn = LeaderConn {
            stream,
            client_id: StrBytes::from_string(client_id),
            next_correlation: 0,
            max_frame,
            login: None,
        };
        if let Some(login) = &security.sasl {
            let renew = conn
                .login(login)
                .await
                .with_context(|| format!("SASL login to {addr} as {}", login.username))?;
            conn.login = Some((login.clone(), renew));
        }
        Ok(conn)
    }

    /// The SASL exchange: the mechanism named in SaslHandshake, then its tokens in
    /// SaslAuthenticate requests until the client side is done. Returns when the session
    /// must be renewed, if the broker bounds it.
    async fn login(&mut self, login: &ClientLogin) -> Result<Option<Instant>> {
        let mut hs = SaslHandshakeRequest::default();
        hs.mechanism = StrBytes::from_static_str(login.mechanism.name());
        let r: SaslHandshakeResponse = self
            .exchange(ApiKey::SaslHandshake, 1, &hs, LOGIN_TIMEOUT)
            .await?;
        if r.error_code != 0 {
            let offered: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            bail!(
                "SaslHandshake refused {} (error {}; the broker offers {offered:?})",
                login.mechanism.name(),
                r.error_code
            );
        }
        let started = Instant::now();
        let mut exchange = login.start(format!("{}", uuid::Uuid::new_v4().simple()));
        let mut server = Bytes::new();
        let mut lifetime_ms = 0;
        for _ in 0..LOGIN_ROUNDS {
            let Some(token) = exchange.step(&server).map_err(|e| anyhow!(e))? else {
                return Ok(renew_at(started, lifetime_ms));
            };
            let mut req = SaslAuthenticateRequest::default();
            req.auth_bytes = Bytes::from(token);
            let left = LOGIN_TIMEOUT.saturating_sub(started.elapsed());
            let r: SaslAuthenticateResponse = self
                .exchange(ApiKey::SaslAuthenticate, 2, &req, left)
                .await?;
            if r.error_code != 0 {
                bail!(
                    "SaslAuthenticate error {}: {}",
                    r.error_code,
                    r.error_message.as_deref().unwrap_or("")
                );
            }
            server = r.auth_bytes;
            lifetime_ms = r.session_lifetime_ms;
        }
        match exchange.step(&server).map_err(|e| anyhow!(e))? {
            None => Ok(renew_at(started, lifetime_ms)),
            Some(_) => bail!("the login took more than {LOGIN_ROUNDS} round trips"),
        }
    }

    /// Sends `body` as API `key` at `version` and reads its response, waiting at most
    /// `timeout` for it; a SASL session due for renewal is renewed first.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        if let Some((login, renew)) = self.login.take() {
            let renew = match renew {
                Some(at) if Instant::now() >= at => self
                    .login(&login)
                    .await
                    .with_context(|| format!("SASL re-authentication as {}", login.username))?,
                other => other,
            };
            self.login = Some((login, renew));
        }
        self.exchange(key, version, body, timeout).await
    }

    /// One request and its response.
    async fn exchange<Req: Encodable, Resp: Decodable>(
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

/// When a session of `lifetime_ms` (0: unbounded) that began at `started` is renewed: at 85%
/// of its lifetime, as Kafka's client re-authenticates between 85% and 95%.
fn renew_at(started: Instant, lifetime_ms: i64) -> Option<Instant> {
    (lifetime_ms > 0).then(|| started + Duration::from_millis(lifetime_ms as u64 * 85 / 100))
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
async fn read_frame(stream: &mut (impl AsyncRead + Unpin), max_frame: usize) -> Result<Bytes> {
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
