//! The console's pure parts: how a key, value or header is shown (text, pretty JSON, hex),
//! how a query string is read, what the message browser was asked for, and which partition
//! a test record goes to. No I/O.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The most bytes of one key, value or header shown; longer ones are cut and marked.
pub const SHOWN_BYTES: usize = 16 * 1024;

/// A key, value or header value as the browser shows it: its size, the text when it is
/// UTF-8, pretty JSON when the text parses as a JSON object or array, and hex always.
/// `None` (a null key or value, a tombstone) is JSON null.
pub fn render(bytes: Option<&[u8]>) -> Value {
    let Some(b) = bytes else {
        return Value::Null;
    };
    let truncated = b.len() > SHOWN_BYTES;
    let shown = &b[..b.len().min(SHOWN_BYTES)];
    let text = match std::str::from_utf8(shown) {
        Ok(t) => Some(t),
        // A cut in the middle of a character still leaves valid text before it.
        Err(e) if truncated && e.error_len().is_none() => {
            std::str::from_utf8(&shown[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    let pretty = match (text, truncated) {
        (Some(t), false) => pretty_json(t),
        _ => None,
    };
    json!({
        "size": b.len(),
        "truncated": truncated,
        "text": text,
        "json": pretty,
        "hex": hex(shown),
    })
}

/// Pretty-printed JSON when `text` is a JSON object or array (a bare number or string is
/// better shown as text).
fn pretty_json(text: &str) -> Option<String> {
    let t = text.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    let v: Value = serde_json::from_str(text).ok()?;
    serde_json::to_string_pretty(&v).ok()
}

/// Lower-case hex, a space between bytes.
pub fn hex(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len() * 3);
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{x:02x}"));
    }
    out
}

/// A query string's parameters (`a=1&b=x%20y`), percent-decoded, `+` read as a space; the
/// last of a repeated name wins. Undecodable escapes are kept as they are.
pub fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// `%XX` escapes to bytes (invalid UTF-8 replaced), `+` to a space.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hexval = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (b.get(i + 1), b.get(i + 2)) {
                (Some(&h), Some(&l)) if hexval(h).is_some() && hexval(l).is_some() => {
                    out.push((hexval(h).unwrap_or(0) * 16 + hexval(l).unwrap_or(0)) as u8);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the message browser starts in each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The log start offset.
    Earliest,
    /// This offset (clamped to the partition's log start and end).
    Offset(i64),
    /// The first record with a timestamp at or after this (ms since the epoch).
    Timestamp(i64),
    /// The last `n` records before the end (the default).
    Newest(i64),
}

/// The partitions asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    All,
    One(i32),
}

/// What the message browser was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Browse {
    pub topic: String,
    pub partitions: Partitions,
    pub start: Start,
    /// At most this many records in the answer.
    pub limit: usize,
}

/// The most records one browse returns.
pub const MAX_LIMIT: usize = 500;
const DEFAULT_LIMIT: usize = 50;

impl Browse {
    /// Reads `topic`, `partition` (a number, or `all`/absent), one of `offset`,
    /// `timestamp` (ms) or `newest` (absent: the newest `limit`), `limit` (1..=500).
    pub fn from_query(q: &BTreeMap<String, String>) -> Result<Browse, String> {
        let topic = match q.get("topic").map(|t| t.trim()) {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => return Err("topic is required".to_string()),
        };
        let num = |name: &str| -> Result<Option<i64>, String> {
            match q.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<i64>()
                    .map(Some)
                    .map_err(|_| format!("{name} must be a whole number, not {v:?}")),
            }
        };
        let partitions = match q.get("partition").map(|p| p.trim()) {
            None | Some("") | Some("all") => Partitions::All,
            Some(p) => match p.parse::<i32>() {
                Ok(n) if n >= 0 => Partitions::One(n),
                _ => {
                    return Err(format!(
                        "partition must be a partition number or all, not {p:?}"
                    ));
                }
            },
        };
        let limit = match num("limit")? {
            None => DEFAULT_LIMIT,
            Some(n) if n >= 1 => (n as u64).min(MAX_LIMIT as u64) as usize,
            Some(n) => return Err(format!("limit must be at least 1, not {n}")),
        };
        let given: Vec<(&str, i64)> = ["offset", "timestamp", "newest"]
            .into_iter()
            .filter_map(|n| num(n).transpose().map(|v| v.map(|v| (n, v))))
            .collect::<Result<_, _>>()?;
        let start = match given[..] {
            [] => Start::Newest(limit as i64),
            [("offset", v)] if v >= 0 => Start::Offset(v),
            [("timestamp", v)] if v >= 0 => Start::Timestamp(v),
            [("newest", v)] if v >= 1 => Start::Newest(v),
            [(name, v)] => return Err(format!("{name} must not be {v}")),
            _ => return Err("give one of offset, timestamp and newest".to_string()),
        };
        let start = match (start, q.get("from").map(String::as_str)) {
            (Start::Newest(_), Some("earliest")) if given.is_empty() => Start::Earliest,
            (s, _) => s,
        };
        Ok(Browse {
            topic,
            partitions,
            start,
            limit,
        })
    }
}

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), on which its default partitioner
/// places keyed records.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java producer's default partitioner gives a keyed record.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_render_as_text_json_and_hex() {
        let v = render(Some(br#"{"a":1,"b":[true]}"#));
        assert_eq!(v["text"], r#"{"a":1,"b":[true]}"#);
        assert_eq!(v["json"], "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}");
        assert_eq!(v["size"], 18);
        let v = render(Some(&[0xde, 0xad, 0x00, 0xff]));
        assert_eq!(v["text"], Value::Null);
        assert_eq!(v["json"], Value::Null);
        assert_eq!(v["hex"], "de ad 00 ff");
        assert_eq!(render(Some(b"42"))["json"], Value::Null);
        assert_eq!(render(Some(b"{not json"))["json"], Value::Null);
        assert_eq!(render(None), Value::Null);
        let big = "é".repeat(SHOWN_BYTES);
        let v = render(Some(big.as_bytes()));
        assert_eq!(v["truncated"], true);
        assert_eq!(v["text"].as_str().map(str::len), Some(SHOWN_BYTES));
    }

    #[test]
    fn queries_are_percent_decoded() {
        let q = parse_query("topic=a%2Fb+c&partition=2&x&bad=%zz%4");
        assert_eq!(q["topic"], "a/b c");
        assert_eq!(q["partition"], "2");
        assert_eq!(q["x"], "");
        assert_eq!(q["bad"], "%zz%4");
        assert_eq!(parse_query("k=%C3%A9")["k"], "é");
    }

    #[test]
    fn browse_queries() {
        let b = |s: &str| Browse::from_query(&parse_query(s));
        let got = b("topic=t").unwrap();
        assert_eq!(got.partitions, Partitions::All);
        assert_eq!(got.start, Start::Newest(50));
        let got = b("topic=t&partition=3&offset=10&limit=9999").unwrap();
        assert_eq!(got.partitions, Partitions::One(3));
        assert_eq!(got.start, Start::Offset(10));
        assert_eq!(got.limit, MAX_LIMIT);
        assert_eq!(b("topic=t&timestamp=5").unwrap().start, Start::Timestamp(5));
        assert_eq!(b("topic=t&from=earliest").unwrap().start, Start::Earliest);
        assert_eq!(b("topic=t&newest=7").unwrap().start, Start::Newest(7));
        assert!(b("partition=1").is_err());
        assert!(b("topic=t&partition=-1").is_err());
        assert!(b("topic=t&offset=x").is_err());
        assert!(b("topic=t&offset=1&timestamp=2").is_err());
        assert!(b("topic=t&limit=0").is_err());
        assert!(b("topic=t&newest=0").is_err());
    }

    #[test]
    fn murmur2_is_kafkas() {
        // Values from Kafka's UtilsTest.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
        assert_eq!(
            partition_for_key(b"21", 3),
            (-973932308i32 & 0x7fff_ffff) % 3
        );
    }
}
