//! The principal of a TLS client: the certificate subject written as Java's
//! `X500Principal.getName()` writes it (RFC 2253), mapped through `ssl.principal.mapping.rules`
//! as Kafka's `SslPrincipalMapper` maps it.
//!
//! Rules are a comma-separated list of `DEFAULT` (the subject unchanged) and
//! `RULE:pattern/replacement/[L|U]` (when `pattern` matches the whole subject, every match of it
//! is replaced by `replacement`, with `$n` back references, then lower- or upper-cased). The
//! first rule that applies wins; when none applies the client is refused. `\` escapes a `/` or a
//! `\` in a pattern or a replacement.

use regex::{Captures, Regex};
use x509_parser::asn1_rs::{Tag, ToDer};
use x509_parser::x509::X509Name;

/// One mapping rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Pattern {
        regex: Regex,
        /// The same pattern anchored at both ends, for Java's `matches()`.
        whole: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// `ssl.principal.mapping.rules`, parsed.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    /// The rules as written, for the refusal message.
    text: String,
}

impl PrincipalMapper {
    /// Parses the rules; the error names the rule that is not one.
    pub fn parse(text: &str) -> Result<PrincipalMapper, String> {
        let mut rules = Vec::new();
        let s = text.trim();
        let mut rest = s;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (rule, after) = parse_one(rest)?;
            if let Some(r) = rule {
                rules.push(r);
            }
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(r) => r,
                None if after.is_empty() => after,
                None => return Err(format!("invalid rule: unmatched substring `{after}`")),
            };
        }
        Ok(PrincipalMapper {
            rules,
            text: s.to_string(),
        })
    }

    /// The principal name for a certificate subject, or why no rule applies.
    pub fn map(&self, subject: &str) -> Result<String, String> {
        for r in &self.rules {
            match r {
                Rule::Default => return Ok(subject.to_string()),
                Rule::Pattern {
                    regex,
                    whole,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(subject) {
                        continue;
                    }
                    let out = replace_all_java(regex, subject, replacement);
                    return Ok(match case {
                        Case::Keep => out,
                        Case::Lower => out.to_lowercase(),
                        Case::Upper => out.to_uppercase(),
                    });
                }
            }
        }
        Err(format!(
            "no ssl.principal.mapping.rules apply to {subject} (rules: {})",
            self.text
        ))
    }
}

/// One rule at the start of `s`: the rule (None for an empty one) and what follows it.
fn parse_one(s: &str) -> Result<(Option<Rule>, &str), String> {
    if let Some(after) = s.strip_prefix("DEFAULT") {
        return Ok((Some(Rule::Default), after));
    }
    let Some(body) = s.strip_prefix("RULE:") else {
        if s.starts_with(',') {
            return Ok((None, s));
        }
        let end = s.find(',').unwrap_or(s.len());
        return Err(format!("invalid rule: `{}`", s[..end].trim_end()));
    };
    let bad = || {
        let end = s.find(',').unwrap_or(s.len());
        format!("invalid rule: `{}`", &s[..end])
    };
    let (pattern, after) = until_slash(body).ok_or_else(bad)?;
    let (replacement, after) = until_slash(after).ok_or_else(bad)?;
    let (case, after) = match after.as_bytes().first() {
        Some(b'L') => (Case::Lower, &after[1..]),
        Some(b'U') => (Case::Upper, &after[1..]),
        _ => (Case::Keep, after),
    };
    let bad_pattern = |e: regex::Error| format!("invalid rule pattern {pattern:?}: {e}");
    let regex = Regex::new(&pattern).map_err(bad_pattern)?;
    // A leftmost match that stops short can hide a longer one, so the whole-input test uses
    // an anchored copy rather than the first match's bounds.
    let whole = Regex::new(&format!(r"\A(?:{pattern})\z")).map_err(bad_pattern)?;
    Ok((
        Some(Rule::Pattern {
            regex,
            whole,
            replacement,
            case,
        }),
        after,
    ))
}

/// The text up to the first unescaped `/` (escapes kept, for the regex or the replacement to
/// read), and what follows that `/`.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, n) = chars.next()?;
                // `\/` is a literal slash: the regex and the replacement see `/` alone.
                if n != '/' {
                    out.push('\\');
                }
                out.push(n);
            }
            '/' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `String.replaceAll`: every match, an empty match allowed right after a non-empty one.
fn replace_all_java(re: &Regex, s: &str, replacement: &str) -> String {
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while at <= s.len() {
        let Some(caps) = re.captures_at(s, at) else {
            break;
        };
        let m = caps.get(0).expect("group 0 always matches");
        out.push_str(&s[copied..m.start()]);
        expand(&caps, replacement, &mut out);
        copied = m.end();
        at = if m.is_empty() {
            match s[m.end()..].chars().next() {
                Some(c) => m.end() + c.len_utf8(),
                None => break,
            }
        } else {
            m.end()
        };
    }
    out.push_str(&s[copied..]);
    out
}

/// Expands a Java replacement string: `$n` (digits taken while they name a group), `${name}`,
/// `\x` for a literal x. A `$n` naming no group is kept literally, as Kafka's mapper keeps it.
fn expand(caps: &Captures<'_>, replacement: &str, out: &mut String) {
    let groups = caps.len() - 1;
    let b = replacement.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => {
                let c = replacement[i + 1..].chars().next().unwrap_or('\\');
                out.push(c);
                i += 1 + c.len_utf8();
            }
            b'$' if i + 1 < b.len() && b[i + 1].is_ascii_digit() => {
                let digits_end = b[i + 1..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(b.len(), |p| i + 1 + p);
                let digits = &replacement[i + 1..digits_end];
                let mut wanted: u64 = digits.parse().unwrap_or(u64::MAX);
                while wanted > groups as u64 && wanted >= 10 {
                    wanted /= 10;
                }
                if !digits.starts_with('0') && wanted > groups as u64 {
                    out.push_str(&replacement[i..digits_end]);
                    i = digits_end;
                    continue;
                }
                // Java: the first digit, then more while the number still names a group.
                let mut n = (b[i + 1] - b'0') as usize;
                let mut j = i + 2;
                while j < b.len() && b[j].is_ascii_digit() {
                    let next = n * 10 + (b[j] - b'0') as usize;
                    if next > groups {
                        break;
                    }
                    n = next;
                    j += 1;
                }
                if let Some(g) = caps.get(n) {
                    out.push_str(g.as_str());
                }
                i = j;
            }
            b'$' if b.get(i + 1) == Some(&b'{') => match replacement[i + 2..].find('}') {
                Some(end) => {
                    let name = &replacement[i + 2..i + 2 + end];
                    if let Some(g) = caps.name(name) {
                        out.push_str(g.as_str());
                    }
                    i += 3 + end;
                }
                None => {
                    out.push('$');
                    i += 1;
                }
            },
            _ => {
                let c = replacement[i..].chars().next().unwrap_or('?');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
}

/// A distinguished name in RFC 2253 form as Java writes it: the RDNs last-encoded first,
/// the attributes of a multi-valued RDN joined by `+`, the keywords RFC 2253 defines and
/// dotted OIDs with `#` and the hex of the DER value for every other attribute.
pub fn rfc2253(name: &X509Name<'_>) -> String {
    let mut rdns: Vec<String> = Vec::new();
    for rdn in name.iter_rdn() {
        let avas: Vec<String> = rdn
            .iter()
            .map(|ava| {
                let oid = ava.attr_type().to_id_string();
                let value = ava.attr_value();
                match (keyword(&oid), string_value(value.tag(), value.data)) {
                    (Some(k), Some(v)) => format!("{k}={}", escape(&v)),
                    _ => {
                        let der = value.to_der_vec().unwrap_or_default();
                        let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                        format!("{oid}=#{hex}")
                    }
                }
            })
            .collect();
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    rdns.join(",")
}

/// RFC 2253's attribute type keywords.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The text of a directory string, for the string types X.520 allows.
fn string_value(tag: Tag, data: &[u8]) -> Option<String> {
    match tag {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::NumericString => {
            std::str::from_utf8(data).ok().map(str::to_string)
        }
        Tag::T61String => Some(data.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            if !data.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        Tag::UniversalString => {
            if !data.len().is_multiple_of(4) {
                return None;
            }
            data.chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        }
        _ => None,
    }
}

/// RFC 2253 escaping: `,+"\<>;` always, `#` and space at the start, space at the end, and
/// control characters as `\XX` per UTF-8 byte.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' => {
                out.push('\\');
                out.push(c);
            }
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Result<String, String> {
        PrincipalMapper::parse(rules).unwrap().map(dn)
    }

    #[test]
    fn default_keeps_the_subject() {
        assert_eq!(map("DEFAULT", "CN=alice,OU=x").unwrap(), "CN=alice,OU=x");
        assert_eq!(
            map("", "CN=a").unwrap_err().contains("no ssl.principal"),
            true
        );
    }

    #[test]
    fn rules_as_kafka_documents_them() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
                     RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
                     DEFAULT";
        let m = PrincipalMapper::parse(rules).unwrap();
        for (subject, principal) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=JavaSoft,dc=oracle,dc=com", "DUKE@JAVASOFT"),
            ("OU=JavaSoft,O=Oracle,CN=dukes.example", "DUKES.EXAMPLE"),
            ("OU=JavaSoft,O=Oracle,C=US", "OU=JavaSoft,O=Oracle,C=US"),
        ] {
            assert_eq!(m.map(subject).unwrap(), principal, "{subject}");
        }
    }

    #[test]
    fn first_matching_rule_wins_and_none_refuses() {
        let m = PrincipalMapper::parse("RULE:^CN=([a-z]+)$/$1/, RULE:^CN=(.*)$/other/").unwrap();
        assert_eq!(m.map("CN=bob").unwrap(), "bob");
        assert_eq!(m.map("CN=Bob").unwrap(), "other");
        let e = m.map("OU=x").unwrap_err();
        assert!(e.contains("OU=x"), "{e}");
    }

    #[test]
    fn escapes_slashes_and_literal_references() {
        // An escaped slash in the pattern and in the replacement.
        assert_eq!(
            map(r"RULE:^CN=(.*)\/(.*)$/$1\/$2/", "CN=a/b").unwrap(),
            "a/b"
        );
        // $5 with one group: truncated to nothing usable, so kept literally.
        assert_eq!(map("RULE:^CN=(.*)$/$1-$5/", "CN=a").unwrap(), "a-$5");
        // $12 with one group is group 1 followed by a literal 2 (Java reads digits greedily
        // only while they name a group).
        assert_eq!(map("RULE:^CN=(.*)$/$12/", "CN=a").unwrap(), "a2");
    }

    #[test]
    fn replace_all_follows_java() {
        // Java's replaceAll of `.*` on "abc" also replaces the empty match at the end.
        assert_eq!(map("RULE:.*/x/", "abc").unwrap(), "xx");
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            "RULE:abc",
            "RULE:a/b",
            "NOPE",
            "DEFAULT junk",
            "RULE:^(.*$/$1/",
            "RULE:a/b/Lx",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
        // Empty rules between commas are skipped.
        assert!(PrincipalMapper::parse("DEFAULT, ,DEFAULT").is_ok());
        // A comma inside a pattern belongs to the pattern.
        let m = PrincipalMapper::parse("RULE:^CN=(.*?),OU=(.*?)$/$2/").unwrap();
        assert_eq!(m.map("CN=a,OU=b").unwrap(), "b");
    }

    #[test]
    fn escaping_as_rfc_2253() {
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
        assert_eq!(escape(" #x "), r"\ #x\ ");
        assert_eq!(escape("#x"), r"\#x");
        assert_eq!(escape("é\u{1}"), r"é\01");
        assert_eq!(escape("a=b"), "a=b");
    }
}
