//! A request frame's header: the context a handler gets ([`RequestCtx`]), the header parsed
//! against the versions the broker serves, the lenient peek a log line uses, and the guarded
//! decoding and encoding of bodies. Knows no handler: which keys and versions are served is
//! passed in ([`ServedLookup`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::response::{FrameBuf, Response};

/// What a handler gets besides the broker and the request body.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The client's address (None for synthetic requests).
    pub peer: Option<std::net::SocketAddr>,
    /// Who sent the request (User:ANONYMOUS until a security protocol says otherwise).
    pub principal: Arc<crate::security::Principal>,
    /// The request's size in bytes, header included (what produce quotas count).
    pub size: usize,
    /// The listener the request arrived on: answers that name brokers give their addresses
    /// on this listener.
    pub listener: Arc<str>,
}

impl RequestCtx {
    /// A request that came from no connection: its header fields only, from nobody.
    pub fn synthetic(api_key: ApiKey, version: i16, correlation_id: i32) -> RequestCtx {
        RequestCtx {
            api_key,
            version,
            correlation_id,
            client_id: None,
            peer: None,
            principal: anonymous(),
            size: 0,
            listener: Arc::from(""),
        }
    }

    /// The client host as Kafka reports it (`InetAddress.toString`: "/127.0.0.1").
    pub fn client_host(&self) -> String {
        self.peer
            .map(|a| format!("/{}", a.ip()))
            .unwrap_or_default()
    }
}

/// The versions of one API key the broker serves.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

/// The served versions of an API key (by its number), None for a key not served.
pub type ServedLookup = fn(i16) -> Option<Served>;

/// A frame whose header has been parsed.
pub enum Header {
    /// A request for a served API at a served version; `body` follows the header.
    Request { ctx: RequestCtx, body: Bytes },
    /// ApiVersions above the served range: answered in v0 with UNSUPPORTED_VERSION.
    UnsupportedApiVersions { correlation_id: i32 },
}

/// Parses the request header. An error closes the connection, as Kafka does for a request
/// it cannot parse, an unknown API key, or a version it does not serve.
pub fn parse_header(mut frame: Bytes, served: ServedLookup) -> Result<Header> {
    if frame.len() < 8 {
        bail!(
            "frame of {} bytes is shorter than a request header",
            frame.len()
        );
    }
    let size = frame.len();
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Some(spec) = served(key) else {
        bail!("unsupported API key {key}");
    };
    if version < spec.min || version > spec.max {
        if spec.key == ApiKey::ApiVersions && version > spec.max {
            return Ok(Header::UnsupportedApiVersions { correlation_id });
        }
        bail!(
            "{:?} version {version} outside served range {}..={}",
            spec.key,
            spec.min,
            spec.max
        );
    }
    let header_version = spec.key.request_header_version(version);
    let header: RequestHeader = {
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            RequestHeader::decode(&mut frame, header_version)
        }));
        match r {
            Ok(Ok(h)) => h,
            _ => bail!("malformed request header"),
        }
    };
    let ctx = RequestCtx {
        api_key: spec.key,
        version,
        correlation_id,
        client_id: header.client_id.map(|s| s.to_string()),
        peer: None,
        principal: anonymous(),
        size,
        listener: Arc::from(""),
    };
    Ok(Header::Request { ctx, body: frame })
}

/// What a log line says about a request that was not served, read leniently from the fixed
/// start of every request header (API key, version, correlation id, then the client id in all
/// header versions but v0), so it also works on frames that [`parse_header`] rejects.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FrameHead {
    pub api_key: Option<i16>,
    pub version: Option<i16>,
    pub client_id: Option<String>,
}

impl FrameHead {
    pub fn peek(frame: &[u8]) -> FrameHead {
        let i16_at = |at: usize| {
            frame
                .get(at..at + 2)
                .map(|b| i16::from_be_bytes([b[0], b[1]]))
        };
        let client_id = i16_at(8).and_then(|len| {
            let len = usize::try_from(len).ok()?;
            let bytes = frame.get(10..10 + len)?;
            Some(String::from_utf8_lossy(bytes).into_owned())
        });
        FrameHead {
            api_key: i16_at(0),
            version: i16_at(2),
            client_id,
        }
    }

    /// The key's name, as Kafka logs it ("Metadata"), or "unknown".
    pub fn api_name(&self) -> String {
        match self.api_key.map(ApiKey::try_from) {
            Some(Ok(k)) => format!("{k:?}"),
            _ => "unknown".to_string(),
        }
    }
}

/// The principal of a request that came from no authenticated connection.
pub fn anonymous() -> Arc<crate::security::Principal> {
    Arc::new(crate::security::Principal::anonymous())
}

/// Decodes a request body. Decoding runs under `catch_unwind` as a second guard (the first is
/// the allocator, see `alloc.rs`): a malformed body must close one connection, never the broker.
pub fn decode<T: Decodable>(ctx: &RequestCtx, mut body: Bytes) -> Result<T> {
    let version = ctx.version;
    match std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(&mut body, version))) {
        Ok(r) => r.map_err(|e| anyhow!("malformed {:?} v{version} request: {e}", ctx.api_key)),
        Err(_) => bail!(
            "malformed {:?} v{version} request (decoder panicked)",
            ctx.api_key
        ),
    }
}

/// Encodes a complete response frame: size, header (version chosen by the API), body.
pub fn respond<T: Encodable>(ctx: &RequestCtx, body: &T) -> Result<Option<Response>> {
    let mut frame = FrameBuf::new();
    write_header(ctx, frame.buf())?;
    body.encode(frame.buf(), ctx.version)?;
    Ok(Some(frame.finish()))
}

/// Writes the response header for `ctx` into `buf`.
pub fn write_header(ctx: &RequestCtx, buf: &mut bytes::BytesMut) -> Result<()> {
    let header_version = ctx.api_key.response_header_version(ctx.version);
    let mut header = ResponseHeader::default();
    header.correlation_id = ctx.correlation_id;
    header.encode(buf, header_version)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FrameHead;

    #[test]
    fn frame_head_reads_what_is_there() {
        let mut f = vec![0, 3, 0, 99, 0, 0, 0, 7, 0, 2, b'i', b'd', 0xff];
        assert_eq!(
            FrameHead::peek(&f),
            FrameHead {
                api_key: Some(3),
                version: Some(99),
                client_id: Some("id".into()),
            }
        );
        assert_eq!(FrameHead::peek(&f).api_name(), "Metadata");
        f[8..10].copy_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(FrameHead::peek(&f).client_id, None);
        f[8..10].copy_from_slice(&100i16.to_be_bytes());
        assert_eq!(
            FrameHead::peek(&f).client_id,
            None,
            "client id past the frame end"
        );
        assert_eq!(FrameHead::peek(&f[..3]).version, None);
        assert_eq!(FrameHead::peek(&[0x27, 0x0f]).api_name(), "unknown");
        assert_eq!(FrameHead::peek(&[]), FrameHead::default());
    }
}
