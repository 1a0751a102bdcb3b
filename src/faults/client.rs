//! The client side of `/faults` and the `sluice faults` command ([`FaultsArgs`]): one
//! HTTP/1.1 request per call on a fresh connection (`Connection: close`), the answer read to
//! its end and parsed by [`parse_answer`] (which the Schema Registry's forwarding of writes
//! to their writer shares).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use serde_json::Value;

/// Where the broker's HTTP server is and who asks.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port` of `sluice.http.server.listeners`.
    pub authority: String,
    /// HTTP Basic credentials (a SASL user's), when the broker asks for them.
    pub user: Option<(String, String)>,
    pub timeout: Duration,
}

impl Endpoint {
    /// From a URL `http://host:port` (or a bare `host:port`).
    pub fn parse(url: &str) -> Result<Endpoint> {
        let rest = url.strip_prefix("http://").unwrap_or(url);
        if rest.contains("://") {
            bail!("{url}: only http:// URLs are served");
        }
        let authority = rest.trim_end_matches('/').to_string();
        if authority.is_empty() || authority.contains('/') {
            bail!("{url}: expected http://host:port");
        }
        Ok(Endpoint {
            authority,
            user: None,
            timeout: Duration::from_secs(10),
        })
    }

    /// `POST /faults` with `spec` (the JSON a fault is written as); the fault as created.
    pub fn add(&self, spec: &Value) -> Result<Value> {
        self.call("POST", "/faults", Some(spec))
    }

    /// `GET /faults`.
    pub fn list(&self) -> Result<Value> {
        self.call("GET", "/faults", None)
    }

    /// `DELETE /faults/{id}`, or every fault with None.
    pub fn remove(&self, id: Option<u64>) -> Result<Value> {
        match id {
            Some(id) => self.call("DELETE", &format!("/faults/{id}"), None),
            None => self.call("DELETE", "/faults", None),
        }
    }

    /// One request; the JSON answer of a 2xx, else an error with the server's message.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let (status, text) = self.exchange(method, path, body)?;
        let json: Option<Value> = serde_json::from_str(&text).ok();
        if (200..300).contains(&status) {
            return json.ok_or_else(|| anyhow!("HTTP {status}: not JSON: {text}"));
        }
        let msg = json
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| text.trim().to_string());
        bail!("HTTP {status}: {msg}")
    }

    /// Sends the request and returns the status and the body.
    fn exchange(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, String)> {
        let addr = self
            .authority
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {}", self.authority))?
            .next()
            .ok_or_else(|| anyhow!("{} resolves to no address", self.authority))?;
        let mut s = TcpStream::connect_timeout(&addr, self.timeout)
            .with_context(|| format!("cannot connect to {}", self.authority))?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        let payload = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\n",
            self.authority
        );
        if let Some((u, p)) = &self.user {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            head.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        if body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", payload.len()));
        s.write_all(head.as_bytes())?;
        s.write_all(payload.as_bytes())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .with_context(|| format!("reading the answer of {}", self.authority))?;
        parse_response(&raw)
    }
}

/// A complete HTTP/1.1 response: the status, the headers (names as sent) and the body
/// (de-chunked).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A complete HTTP/1.1 response (`Content-Length`, chunked, or to the end of the
/// connection), read to the end of its connection.
pub fn parse_answer(raw: &[u8]) -> Result<Answer> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("the answer is not HTTP"))?;
    let head = std::str::from_utf8(&raw[..split])?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("the answer has no HTTP status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut answer = Answer {
        status,
        headers,
        body: Vec::new(),
    };
    answer.body = match answer.header("transfer-encoding") {
        Some(v) if v.eq_ignore_ascii_case("chunked") => dechunk(body)?,
        _ => body.to_vec(),
    };
    Ok(answer)
}

/// The status and the body as text.
fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
    let a = parse_answer(raw)?;
    Ok((a.status, String::from_utf8_lossy(&a.body).into_owned()))
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("a truncated chunked body"))?;
        let size_text = std::str::from_utf8(&b[..eol])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("a bad chunk size")?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            bail!("a truncated chunk");
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// `sluice faults ...`: manage a broker's injected faults over its HTTP port.
#[derive(clap::Args, Debug)]
pub struct FaultsArgs {
    /// The broker's HTTP server (sluice.http.server.listeners).
    #[arg(long, value_name = "URL", default_value = "http://localhost:8090")]
    pub url: String,
    /// A SASL user to sign in as (when a listener uses SASL); the password is read from
    /// SLUICE_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    #[command(subcommand)]
    pub command: FaultsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum FaultsCommand {
    /// Inject a fault; prints it with its id.
    Add(Box<AddArgs>),
    /// List the faults with how many requests each fired on.
    List,
    /// Remove one fault by id, or every fault with --all.
    Remove {
        #[arg(required_unless_present = "all")]
        id: Option<u64>,
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
}

/// `sluice faults add`: what the fault does and which requests it matches.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The API key, by name (Produce, JoinGroup, ...) or number; `*` (or none) is every
    /// key.
    #[arg(long, value_name = "KEY")]
    pub api: Option<String>,
    /// Answer with this error (name, e.g. NOT_LEADER_OR_FOLLOWER, or code).
    #[arg(long, value_name = "ERROR", group = "kind")]
    pub error: Option<String>,
    /// Delay the responses by this many milliseconds.
    #[arg(long, value_name = "MS", group = "kind")]
    pub delay_ms: Option<u64>,
    /// Close the connection `before` the request is applied or `after`.
    #[arg(long, value_name = "WHEN", group = "kind")]
    pub close: Option<String>,
    /// Answer no request for this many milliseconds (every connection is closed).
    #[arg(long, value_name = "MS", group = "kind")]
    pub down_ms: Option<u64>,
    /// In a cluster: move the leadership of TOPIC:PARTITION now (to --to, or to another
    /// in-sync replica).
    #[arg(long, value_name = "TOPIC:PARTITION", group = "kind")]
    pub move_leader: Option<String>,
    /// The broker --move-leader moves the leadership to.
    #[arg(long, value_name = "BROKER", requires = "move_leader")]
    pub to: Option<i32>,
    /// In a cluster: cut this node off from the other nodes until the fault is removed
    /// (or for --for-ms).
    #[arg(long, group = "kind")]
    pub isolate: bool,
    /// Fire only for this many milliseconds from now.
    #[arg(long, value_name = "MS")]
    pub for_ms: Option<u64>,
    /// How many requests it fires on (default 1 for errors and closes, every request
    /// for delays).
    #[arg(long, value_name = "N", conflicts_with = "every")]
    pub count: Option<u64>,
    /// Fire on every matching request until removed.
    #[arg(long)]
    pub every: bool,
    /// Only requests naming this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only requests naming this partition of --topic.
    #[arg(long, requires = "topic")]
    pub partition: Option<i32>,
    /// Only requests from this client id.
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
}

impl FaultsArgs {
    /// Runs the command; the broker's JSON answer.
    pub fn run(&self) -> Result<Value> {
        let mut ep = Endpoint::parse(&self.url)?;
        if let Some(u) = &self.user {
            let password = std::env::var("SLUICE_PASSWORD")
                .context("--user needs the password in SLUICE_PASSWORD")?;
            ep.user = Some((u.clone(), password));
        }
        match &self.command {
            FaultsCommand::List => ep.list(),
            FaultsCommand::Remove { id, .. } => ep.remove(*id),
            FaultsCommand::Add(add) => {
                let AddArgs {
                    api,
                    error,
                    delay_ms,
                    close,
                    down_ms,
                    move_leader,
                    to,
                    isolate,
                    for_ms,
                    count,
                    every,
                    topic,
                    partition,
                    client_id,
                } = add.as_ref();
                let mut spec = serde_json::Map::new();
                if let Some(api) = api {
                    let api = match api.parse::<i64>() {
                        Ok(n) => Value::from(n),
                        Err(_) => Value::from(api.as_str()),
                    };
                    spec.insert("api_key".into(), api);
                }
                if let Some(e) = error {
                    spec.insert("kind".into(), "error".into());
                    let e = match e.parse::<i64>() {
                        Ok(n) => Value::from(n),
                        Err(_) => Value::from(e.as_str()),
                    };
                    spec.insert("error".into(), e);
                } else if let Some(d) = delay_ms {
                    spec.insert("kind".into(), "delay".into());
                    spec.insert("delay_ms".into(), (*d).into());
                } else if let Some(w) = close {
                    spec.insert("kind".into(), "close".into());
                    spec.insert("when".into(), w.as_str().into());
                } else if let Some(d) = down_ms {
                    spec.insert("kind".into(), "down".into());
                    spec.insert("duration_ms".into(), (*d).into());
                } else if let Some(tp) = move_leader {
                    let (topic, partition) = tp
                        .rsplit_once(':')
                        .and_then(|(t, p)| Some((t, p.parse::<i32>().ok()?)))
                        .ok_or_else(|| {
                            anyhow!("--move-leader takes TOPIC:PARTITION, not {tp:?}")
                        })?;
                    spec.insert("kind".into(), "move_leader".into());
                    spec.insert("topic".into(), topic.into());
                    spec.insert("partition".into(), partition.into());
                    if let Some(to) = to {
                        spec.insert("to".into(), (*to).into());
                    }
                } else if *isolate {
                    spec.insert("kind".into(), "isolate".into());
                } else {
                    bail!(
                        "say what the fault does: --error, --delay-ms, --close, --down-ms, --move-leader or --isolate"
                    );
                }
                if let Some(d) = for_ms {
                    spec.insert("duration_ms".into(), (*d).into());
                }
                if *every {
                    spec.insert("count".into(), Value::Null);
                } else if let Some(n) = count {
                    spec.insert("count".into(), (*n).into());
                }
                if let Some(t) = topic {
                    spec.insert("topic".into(), t.as_str().into());
                }
                if let Some(p) = partition {
                    spec.insert("partition".into(), (*p).into());
                }
                if let Some(c) = client_id {
                    spec.insert("client_id".into(), c.as_str().into());
                }
                ep.add(&Value::Object(spec))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_answers_are_read() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8090/").unwrap().authority,
            "127.0.0.1:8090"
        );
        assert_eq!(Endpoint::parse("h:1").unwrap().authority, "h:1");
        assert!(Endpoint::parse("https://h:1").is_err());
        assert!(Endpoint::parse("http://h:1/x").is_err());
        let plain = b"HTTP/1.1 403 Forbidden\r\ncontent-length: 13\r\n\r\n{\"error\":\"x\"}";
        assert_eq!(
            parse_response(plain).unwrap(),
            (403, "{\"error\":\"x\"}".into())
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (200, "{\"a\":1}".into()));
        assert!(parse_response(b"garbage").is_err());
        let a = parse_answer(plain).unwrap();
        assert_eq!(a.header("Content-Length"), Some("13"));
        assert_eq!(a.header("x-other"), None);
    }
}
