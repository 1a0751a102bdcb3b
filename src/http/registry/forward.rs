//! Registry writes from any node, as Confluent's follower instances forward to their leader:
//! a write (a registration, a delete, a config or mode change) that reaches a broker which
//! is not the registry's writer (the leader of `_schemas` partition 0, `crate::registry`) is
//! sent on to the writer's HTTP listener, and the writer's answer (status and body) comes
//! back unchanged. Each broker registers its HTTP listener with the controller beside its
//! Kafka listeners (`cluster::metadata::HTTP_ENDPOINT`), so the metadata image names the
//! writer's address.
//!
//! - While the writer moves (a leader election after a node's death, `_schemas` created by
//!   the first write on another node), the write is tried again every [`BACKOFF`] for up to
//!   [`RETRY_FOR`]; after that the last reason is answered: 50004 when no writer is known
//!   (no leader, or a leader without an HTTP listener), 50003 when it could not be reached.
//!   A write the writer may have received (the connection lost after the request was sent)
//!   is not sent again: 50003 at once, and the client decides.
//! - A forwarded request carries [`FORWARDED`]: the broker it reaches answers it itself
//!   (50004 if it is not, or no longer, the writer), so a request never travels further.
//! - The writer's answer to a forwarded request carries [`POSITION`], the `_schemas` offset
//!   its state is read up to after the write; the forwarding broker reads its own replica up
//!   to there (for at most [`CATCH_UP`]) before answering, so a client reading from the broker
//!   it wrote through sees its write.
//! - A broker that holds no replica of `_schemas` (its replication factor is below the number
//!   of brokers) has no state to read: it sends every registry request, reads included, to
//!   the writer in the same way ([`without_replica`]).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{Answer, CONTENT_TYPE, reply};
use crate::cluster::metadata::MetadataImage;
use crate::faults::client::{Answer as HttpAnswer, parse_answer};
use crate::http::HttpState;
use crate::registry::{Error, Registry, TOPIC, WRITE_TIMEOUT};

/// Marks a write forwarded by another broker.
pub const FORWARDED: &str = "x-sluice-registry-forwarded";
/// On the writer's answer to a forwarded write: the `_schemas` offset its state is read up to.
pub const POSITION: &str = "x-sluice-registry-position";

/// How long a write keeps looking for its writer.
const RETRY_FOR: Duration = Duration::from_secs(5);
const BACKOFF: Duration = Duration::from_millis(200);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The writer's own bound on a write, and a margin for the round trip.
const ANSWER_TIMEOUT: Duration = WRITE_TIMEOUT.saturating_add(Duration::from_secs(5));
/// How long the forwarding broker waits to read the write from its own replica.
const CATCH_UP: Duration = Duration::from_secs(2);
/// The largest answer read from the writer.
const MAX_ANSWER: u64 = 16 << 20;

/// A registry write as it came in: what forwarding it needs, and the body.
pub struct WriteRequest {
    method: Method,
    /// The path and query.
    target: String,
    content_type: Option<String>,
    forwarded: bool,
    pub body: Bytes,
}

impl WriteRequest {
    /// A write made on this broker rather than received: `POST target` with a JSON body.
    pub fn post(target: String, body: String) -> WriteRequest {
        WriteRequest {
            method: Method::POST,
            target,
            content_type: Some(CONTENT_TYPE.to_string()),
            forwarded: false,
            body: Bytes::from(body),
        }
    }
}

impl<S: Send + Sync> FromRequest<S> for WriteRequest {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let method = req.method().clone();
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let headers = req.headers();
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let forwarded = headers.contains_key(FORWARDED);
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(WriteRequest {
            method,
            target,
            content_type,
            forwarded,
            body,
        })
    }
}

/// Who writes the registry, as this broker's metadata image tells.
#[derive(Debug, PartialEq, Eq)]
enum Writer {
    /// This broker (or nobody yet: `_schemas` does not exist and the write creates it here).
    Here,
    /// Another broker, at its HTTP listener's address if it registered one.
    At { node: i32, address: Option<String> },
    /// `_schemas` partition 0 has no leader.
    Unknown,
}

/// The writer in `img` (None: a single node's file-mode metadata) for broker `me`.
fn writer(img: Option<&MetadataImage>, me: i32) -> Writer {
    let Some(t) = img.and_then(|img| img.topic(TOPIC)) else {
        return Writer::Here;
    };
    match t.partitions.first().map(|p| p.leader) {
        Some(leader) if leader == me => Writer::Here,
        Some(leader) if leader >= 0 => Writer::At {
            node: leader,
            address: img
                .and_then(|img| img.brokers.get(&leader))
                .and_then(|b| b.registration.http_address()),
        },
        _ => Writer::Unknown,
    }
}

/// Why a forwarded write got no answer.
enum Failed {
    /// Nothing reached the writer (the connection was refused or timed out).
    NotSent(String),
    /// The request went out; the answer did not come back.
    Lost(String),
}

/// Runs a registry write: `local` on this broker when it is the writer, else the request
/// forwarded to the writer (see the module comment).
pub async fn write<F: Future<Output = Answer>>(
    s: &HttpState,
    w: &WriteRequest,
    local: impl Fn() -> F,
) -> Response {
    let r = match super::registry(s) {
        Ok(r) => r,
        Err(e) => return reply(Err(e)),
    };
    if w.forwarded {
        let mut answer = reply(local().await);
        let at = HeaderValue::from(r.position());
        answer.headers_mut().insert(POSITION, at);
        return answer;
    }
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let (img, me) = match s.broker.get() {
            Some(b) => (b.cluster().map(|c| c.image()), b.node_id()),
            None => (None, -1),
        };
        let last = match writer(img.as_deref(), me) {
            Writer::Here => match local().await {
                // not (or not yet) the leader here: the image shows the writer next time
                Err(e) if e.code == Error::not_leader().code => e,
                answer => return reply(answer),
            },
            Writer::At {
                node,
                address: Some(address),
            } => match send(&address, w).await {
                Ok(a) if !unknown_leader(&a) => return relay(&r, a).await,
                Ok(_) => Error::unknown_leader(format!(
                    "node {node} does not lead {TOPIC} partition 0 (any more)"
                )),
                Err(Failed::NotSent(why)) => {
                    Error::forwarding(format!("node {node} at {address}: {why}"))
                }
                Err(Failed::Lost(why)) => {
                    let why = format!("node {node} at {address}: {why}");
                    return reply(Err(Error::forwarding(why)));
                }
            },
            Writer::At {
                node,
                address: None,
            } => Error::unknown_leader(format!(
                "node {node} leads {TOPIC} partition 0 but has no HTTP listener"
            )),
            Writer::Unknown => Error::unknown_leader(format!("{TOPIC} partition 0 has no leader")),
        };
        if Instant::now() + BACKOFF >= deadline {
            return reply(Err(last));
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// Sends a request that reaches a broker holding no replica of `_schemas` to the writer,
/// as a write is sent, and answers with the writer's answer; any other broker answers it
/// itself, and so does the writer a forwarded request reaches.
pub async fn without_replica(State(s): State<HttpState>, req: Request, next: Next) -> Response {
    let elsewhere = s.broker.get().is_some_and(|b| {
        let img = b.cluster().map(|c| c.image());
        no_replica(img.as_deref(), b.node_id())
    });
    if !elsewhere || req.headers().contains_key(FORWARDED) {
        return next.run(req).await;
    }
    let w = match WriteRequest::from_request(req, &()).await {
        Ok(w) => w,
        Err(refused) => return refused,
    };
    // Never the writer itself (the writer holds a replica): found in the image, or waited for.
    write(&s, &w, || async { Err(Error::not_leader()) }).await
}

/// Whether `_schemas` exists in `img` with no replica on broker `me`.
fn no_replica(img: Option<&MetadataImage>, me: i32) -> bool {
    img.and_then(|img| img.topic(TOPIC))
        .and_then(|t| t.partitions.first())
        .is_some_and(|p| !p.replicas.contains(&me))
}

/// The writer's answer was 50004: it does not lead (its image was ahead of ours).
fn unknown_leader(a: &HttpAnswer) -> bool {
    a.status == 500
        && serde_json::from_slice::<serde_json::Value>(&a.body)
            .ok()
            .and_then(|v| v.get("error_code")?.as_i64())
            == Some(i64::from(Error::not_leader().code))
}

/// The writer's answer as this broker's, once this broker's replica has the write.
async fn relay(r: &Registry, a: HttpAnswer) -> Response {
    if let Some(at) = a.header(POSITION).and_then(|p| p.parse::<i64>().ok()) {
        r.caught_up_to(at, CATCH_UP).await;
    }
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = a.header("content-type").unwrap_or(CONTENT_TYPE).to_string();
    (status, [(header::CONTENT_TYPE, content_type)], a.body).into_response()
}

/// One HTTP/1.1 exchange with the writer at `address` on a fresh connection.
async fn send(address: &str, w: &WriteRequest) -> Result<HttpAnswer, Failed> {
    let connect = tokio::net::TcpStream::connect(address);
    let mut conn = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(Failed::NotSent(format!("cannot connect: {e}"))),
        Err(_) => return Err(Failed::NotSent("connecting timed out".into())),
    };
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{FORWARDED}: 1\r\n",
        w.method, w.target
    );
    if let Some(ct) = &w.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", w.body.len()));
    let exchange = async {
        conn.write_all(head.as_bytes()).await?;
        conn.write_all(&w.body).await?;
        let mut raw = Vec::new();
        (&mut conn).take(MAX_ANSWER).read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => return Err(Failed::Lost(format!("the exchange failed: {e}"))),
        Err(_) => return Err(Failed::Lost("no answer in time".into())),
    };
    parse_answer(&raw).map_err(|e| Failed::Lost(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::metadata::{
        BrokerRegistration, Endpoint, HTTP_ENDPOINT, MetadataRecord, PartitionRecord,
    };

    fn register(img: &mut MetadataImage, id: i32, http: Option<u16>) {
        let mut endpoints = vec![Endpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
        }];
        endpoints.extend(http.map(|port| Endpoint {
            name: HTTP_ENDPOINT.into(),
            host: "127.0.0.1".into(),
            port,
        }));
        let reg = BrokerRegistration {
            broker_id: id,
            incarnation: uuid::Uuid::new_v4(),
            endpoints,
            rack: None,
        };
        img.apply(img.offset + 1, &MetadataRecord::RegisterBroker(reg));
    }

    #[test]
    fn the_writer_is_the_leader_of_schemas_partition_0() {
        assert_eq!(writer(None, 1), Writer::Here);
        let mut img = MetadataImage::default();
        register(&mut img, 1, Some(8081));
        register(&mut img, 2, Some(8082));
        register(&mut img, 3, None);
        // no `_schemas` yet: the write creates it from here
        assert_eq!(writer(Some(&img), 1), Writer::Here);
        let id = uuid::Uuid::new_v4();
        let topic = MetadataRecord::Topic {
            name: TOPIC.into(),
            id,
        };
        img.apply(img.offset + 1, &topic);
        let mut p = PartitionRecord::for_test(&[1, 2, 3], &[1, 2, 3], 2);
        p.topic_id = id;
        img.apply(img.offset + 1, &MetadataRecord::Partition(p.clone()));
        assert_eq!(writer(Some(&img), 2), Writer::Here);
        assert!(!no_replica(None, 1) && !no_replica(Some(&img), 3));
        let at_2 = Writer::At {
            node: 2,
            address: Some("127.0.0.1:8082".into()),
        };
        assert_eq!(writer(Some(&img), 1), at_2);
        for (leader, want) in [
            (
                3,
                Writer::At {
                    node: 3,
                    address: None,
                },
            ),
            (-1, Writer::Unknown),
        ] {
            p.leader = leader;
            img.apply(img.offset + 1, &MetadataRecord::Partition(p.clone()));
            assert_eq!(writer(Some(&img), 1), want);
        }
        // Two replicas of three brokers: the third reads through the writer.
        p.replicas = vec![1, 2];
        p.isr = vec![1, 2];
        img.apply(img.offset + 1, &MetadataRecord::Partition(p.clone()));
        assert!(no_replica(Some(&img), 3) && !no_replica(Some(&img), 1));
    }
}
