//! Where each setting comes from: Java `.properties` syntax (as `java.util.Properties.load`
//! reads it, which is how Kafka reads `server.properties`) and `--override key=value`.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// Where a setting was given, for messages: `FILE:LINE`, `--override`, or Sluice's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    File {
        path: PathBuf,
        line: usize,
    },
    Override,
    /// A dynamic broker config (KIP-226) from the controller's metadata.
    Dynamic,
    /// A `KAFKA_*` environment variable read with `--kafka-env`.
    Env(String),
    /// The default server.properties of the apache/kafka image (`--kafka-env`, nothing given).
    ImageDefault,
    /// A login module entry of a static JAAS file (`-Djava.security.auth.login.config` in
    /// `KAFKA_OPTS`): the file, the line the entry starts on, and its section.
    Jaas {
        path: PathBuf,
        line: usize,
        section: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Override => write!(f, "--override"),
            Origin::Dynamic => write!(f, "dynamic config"),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::ImageDefault => write!(f, "the apache/kafka image's default"),
            Origin::Jaas {
                path,
                line,
                section,
            } => write!(f, "{}:{line} (JAAS section {section})", path.display()),
        }
    }
}

/// One `key=value` as given, with where it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// Parses Java properties text. Each logical line is `key=value`, `key: value` or
/// `key value`; `#` and `!` start comments; a line ending in an odd number of backslashes
/// continues on the next line (whose leading whitespace is dropped); `\t \n \r \f \uXXXX` and
/// `\x` (for any other x) are unescaped in keys and values. Values lose surrounding
/// whitespace. The origin of an entry is the line it starts on.
pub fn parse_properties(text: &str, path: &Path) -> Result<Vec<Setting>> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((idx, first)) = lines.next() {
        let start = first.trim_start_matches([' ', '\t', '\x0c']);
        if start.is_empty() || start.starts_with('#') || start.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut cur = start;
        loop {
            let trailing = cur.len() - cur.trim_end_matches('\\').len();
            if trailing % 2 == 1 {
                logical.push_str(&cur[..cur.len() - 1]);
                match lines.next() {
                    Some((_, next)) => cur = next.trim_start_matches([' ', '\t', '\x0c']),
                    None => break,
                }
            } else {
                logical.push_str(cur);
                break;
            }
        }
        let origin = Origin::File {
            path: path.to_path_buf(),
            line: idx + 1,
        };
        let (key, value) = split_entry(&logical).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        out.push(Setting { key, value, origin });
    }
    Ok(out)
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace, and unescapes both
/// halves.
fn split_entry(line: &str) -> Result<(String, String)> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    let key = unescape(&line[..i])?;
    let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    let value = unescape(rest)?;
    Ok((key, value.trim_end().to_string()))
}

/// Java properties escapes (`\\t`, `\\n`, `\\r`, `\\f`, `\\uXXXX`, any other character
/// taken as it is).
pub fn unescape(s: &str) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 4 => out.push(ch),
                    _ => bail!("malformed \\uxxxx escape \"\\u{hex}\""),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// Parses one `--override key=value` argument.
pub fn parse_override(arg: &str) -> Result<Setting> {
    let Some((k, v)) = arg.split_once('=') else {
        bail!("--override: expected key=value, got {arg:?}");
    };
    Ok(Setting {
        key: k.trim().to_string(),
        value: v.trim().to_string(),
        origin: Origin::Override,
    })
}

/// Reads `meta.properties`-style files: the (key, value) pairs, in order.
pub fn read_pairs(text: &str, path: &Path) -> Result<Vec<(String, String)>> {
    Ok(parse_properties(text, path)?
        .into_iter()
        .map(|s| (s.key, s.value))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String, usize)> {
        parse_properties(text, Path::new("f"))
            .unwrap()
            .into_iter()
            .map(|s| match s.origin {
                Origin::File { line, .. } => (s.key, s.value, line),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn java_properties_syntax() {
        let p = pairs("# c\n! c\n\na=1\nb : two\nc=x\\\n  y\nd e f\n  g=\n\\#h=\\u0041\\=\\\\\n");
        let want = [
            ("a", "1", 4),
            ("b", "two", 5),
            ("c", "xy", 6),
            ("d", "e f", 8),
            ("g", "", 9),
            ("#h", "A=\\", 10),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(k, v, l)| (k.to_string(), v.to_string(), *l))
            .collect();
        assert_eq!(p, want);
    }

    #[test]
    fn bad_escape_names_the_line() {
        let e = parse_properties("a=1\nb=\\u12\n", Path::new("conf")).unwrap_err();
        assert!(e.to_string().starts_with("conf:2: "), "{e}");
    }

    #[test]
    fn override_needs_equals() {
        assert!(parse_override("a").is_err());
        let s = parse_override(" a = b ").unwrap();
        assert_eq!((s.key.as_str(), s.value.as_str()), ("a", "b"));
    }
}
