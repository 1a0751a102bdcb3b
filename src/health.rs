//! `sluice health`: is a broker answering? Connects to a bootstrap address, sends an
//! ApiVersions request (v0: every Kafka broker answers it) and checks the answer. Blocking
//! std I/O with timeouts: it runs as a container health check, with no runtime to start.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const VERSION: i16 = 0;
const CORRELATION_ID: i32 = 0x5eed;
/// An ApiVersions v0 answer lists some dozens of keys; anything far larger is not one.
const MAX_FRAME: usize = 1 << 20;

/// Checks the broker at `bootstrap` (host:port), trying each address the host resolves to.
/// On success: the address that answered and the number of API keys it lists.
pub fn check(bootstrap: &str, timeout: Duration) -> Result<(SocketAddr, usize), String> {
    let addrs: Vec<SocketAddr> = bootstrap
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {bootstrap}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{bootstrap} resolves to no address"));
    }
    let mut errors = Vec::new();
    for addr in addrs {
        match check_addr(addr, timeout) {
            Ok(n) => return Ok((addr, n)),
            Err(e) => errors.push(format!("{addr}: {e}")),
        }
    }
    Err(errors.join("; "))
}

fn check_addr(addr: SocketAddr, timeout: Duration) -> Result<usize, String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("socket: {e}"))?;
    stream
        .write_all(&request_frame())
        .map_err(|e| format!("send: {e}"))?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| format!("read: {e}"))?;
    let n = i32::from_be_bytes(len);
    if n < 4 || n as usize > MAX_FRAME {
        return Err(format!("not a Kafka answer (frame size {n})"));
    }
    let mut body = vec![0u8; n as usize];
    stream
        .read_exact(&mut body)
        .map_err(|e| format!("read: {e}"))?;
    parse_response(&body)
}

/// The size-prefixed ApiVersions v0 request.
fn request_frame() -> Vec<u8> {
    let key = ApiKey::ApiVersions;
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = VERSION;
    header.correlation_id = CORRELATION_ID;
    header.client_id = Some(StrBytes::from_static_str("sluice-health"));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(VERSION))
        .expect("request header encodes");
    ApiVersionsRequest::default()
        .encode(&mut buf, VERSION)
        .expect("ApiVersions v0 encodes");
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    frame
}

/// Checks one answer frame (without its size): our correlation id, no error, some API keys
/// including ApiVersions itself. The number of keys listed.
fn parse_response(frame: &[u8]) -> Result<usize, String> {
    let key = ApiKey::ApiVersions;
    let mut b = bytes::Bytes::copy_from_slice(frame);
    let header = ResponseHeader::decode(&mut b, key.response_header_version(VERSION))
        .map_err(|e| format!("not a Kafka answer: {e}"))?;
    if header.correlation_id != CORRELATION_ID {
        return Err(format!(
            "answer to another request (correlation id {})",
            header.correlation_id
        ));
    }
    let r = ApiVersionsResponse::decode(&mut b, VERSION)
        .map_err(|e| format!("not an ApiVersions answer: {e}"))?;
    if b.remaining() != 0 {
        return Err(format!(
            "{} bytes after the ApiVersions answer",
            b.remaining()
        ));
    }
    if r.error_code != 0 {
        return Err(format!("ApiVersions error code {}", r.error_code));
    }
    if !r.api_keys.iter().any(|k| k.api_key == key as i16) {
        return Err("the answer does not list ApiVersions".to_string());
    }
    Ok(r.api_keys.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn answer(correlation_id: i32, r: &ApiVersionsResponse) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let mut h = ResponseHeader::default();
        h.correlation_id = correlation_id;
        h.encode(&mut buf, 0).unwrap();
        r.encode(&mut buf, VERSION).unwrap();
        buf.to_vec()
    }

    fn listing(keys: &[i16]) -> ApiVersionsResponse {
        let mut r = ApiVersionsResponse::default();
        r.api_keys = keys
            .iter()
            .map(|&k| {
                let mut v = ApiVersion::default();
                v.api_key = k;
                v.max_version = 3;
                v
            })
            .collect();
        r
    }

    #[test]
    fn request_is_an_api_versions_v0_frame() {
        let f = request_frame();
        assert_eq!(
            i32::from_be_bytes(f[..4].try_into().unwrap()) as usize,
            f.len() - 4
        );
        let mut b = bytes::Bytes::copy_from_slice(&f[4..]);
        let h = RequestHeader::decode(&mut b, 1).unwrap();
        assert_eq!(h.request_api_key, ApiKey::ApiVersions as i16);
        assert_eq!(h.request_api_version, 0);
        assert_eq!(h.correlation_id, CORRELATION_ID);
        ApiVersionsRequest::decode(&mut b, 0).unwrap();
        assert_eq!(b.remaining(), 0);
    }

    #[test]
    fn valid_answer_counts_keys() {
        let f = answer(CORRELATION_ID, &listing(&[0, 1, 18]));
        assert_eq!(parse_response(&f), Ok(3));
    }

    #[test]
    fn wrong_answers_are_errors() {
        let other = answer(7, &listing(&[18]));
        assert!(
            parse_response(&other)
                .unwrap_err()
                .contains("correlation id 7")
        );
        let mut err = listing(&[18]);
        err.error_code = 35;
        assert!(
            parse_response(&answer(CORRELATION_ID, &err))
                .unwrap_err()
                .contains("35")
        );
        let without = answer(CORRELATION_ID, &listing(&[0, 1]));
        assert!(
            parse_response(&without)
                .unwrap_err()
                .contains("does not list")
        );
        assert!(parse_response(b"xy").is_err());
    }
}
