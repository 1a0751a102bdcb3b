//! The JAAS configuration text Kafka reads from `sasl.jaas.config` (one login module):
//! `<class> <flag> key="value" key=value ... ;`, as Java's JAAS file syntax (quoted values
//! may hold spaces and `\"` escapes). Pure.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

/// Splits into words: bare words, quoted strings (unquoted), `=` and `;`.
fn tokens(text: &str) -> Result<Vec<(bool, String)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '=' || c == ';' {
            chars.next();
            out.push((false, c.to_string()));
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    None => return Err("unterminated quoted value".into()),
                    Some('\\') => match chars.next() {
                        Some(e) => s.push(e),
                        None => return Err("unterminated quoted value".into()),
                    },
                    Some(q) if q == c => break,
                    Some(o) => s.push(o),
                }
            }
            out.push((true, s));
        } else {
            let mut s = String::new();
            while let Some(&o) = chars.peek() {
                if o.is_whitespace() || o == '=' || o == ';' || o == '"' || o == '\'' {
                    break;
                }
                s.push(o);
                chars.next();
            }
            out.push((true, s));
        }
    }
    Ok(out)
}

/// Parses one login module entry; Kafka refuses text with no module or with several.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let toks = tokens(text)?;
    let mut entries = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let word = |i: usize, what: &str| -> Result<String, String> {
            match toks.get(i) {
                Some((true, w)) => Ok(w.clone()),
                Some((false, p)) => Err(format!("expected {what}, found {p:?}")),
                None => Err(format!("expected {what} at the end")),
            }
        };
        let login_module = word(i, "a login module class")?;
        let flag = word(
            i + 1,
            "a control flag (required, requisite, sufficient, optional)",
        )?;
        if !["required", "requisite", "sufficient", "optional"]
            .contains(&flag.to_ascii_lowercase().as_str())
        {
            return Err(format!(
                "invalid control flag {flag:?} (required, requisite, sufficient or optional)"
            ));
        }
        i += 2;
        let mut options = BTreeMap::new();
        loop {
            match toks.get(i) {
                Some((false, p)) if p == ";" => {
                    i += 1;
                    break;
                }
                Some((true, key)) => {
                    if !matches!(toks.get(i + 1), Some((false, e)) if e == "=") {
                        return Err(format!("expected '=' after option {key:?}"));
                    }
                    let Some((true, value)) = toks.get(i + 2) else {
                        return Err(format!(
                            "Value not specified for key '{key}' in JAAS config"
                        ));
                    };
                    options.insert(key.clone(), value.clone());
                    i += 3;
                }
                Some((false, p)) => return Err(format!("unexpected {p:?}")),
                None => return Err("the login module entry does not end with ';'".into()),
            }
        }
        entries.push(JaasEntry {
            login_module,
            flag,
            options,
        });
    }
    match entries.len() {
        1 => Ok(entries.pop().unwrap_or_else(|| unreachable!())),
        n => Err(format!(
            "JAAS config property contains {n} login modules, should be 1 module"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_examples() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="alice-secret";"#,
        )
        .unwrap();
        assert_eq!(
            e.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.options["user_alice"], "alice-secret");
        assert_eq!(e.options.len(), 4);
        let e = parse("org.apache.kafka.common.security.scram.ScramLoginModule required;").unwrap();
        assert!(e.options.is_empty());
        let e = parse(r#"M required a=b c="with \"q\" and ;";"#).unwrap();
        assert_eq!(e.options["a"], "b");
        assert_eq!(e.options["c"], "with \"q\" and ;");
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        assert!(parse("").is_err());
        assert!(parse("M required").is_err());
        assert!(parse("M bogus;").is_err());
        assert!(parse("M required a=;").unwrap_err().contains("'a'"));
        assert!(parse(r#"M required a="x;"#).is_err());
        assert!(
            parse("M required; N required;")
                .unwrap_err()
                .contains("2 login modules")
        );
    }
}
