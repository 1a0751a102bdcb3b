//! JAAS configuration text as Kafka reads it: one login module entry in a `sasl.jaas.config`
//! property (`<class> <flag> key="value" key=value ... ;`), or the sections of a static JAAS
//! file (`-Djava.security.auth.login.config=FILE`): `Name { entry; entry; ... };`, with `//`,
//! `/* */` and `#` comments, as Java's JAAS file syntax. Quoted values may hold spaces and
//! `\"` escapes. Pure.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

impl JaasEntry {
    /// The entry as `sasl.jaas.config` text, every value quoted (and parsed back unchanged).
    pub fn to_config_text(&self) -> String {
        let mut out = format!("{} {}", self.login_module, self.flag);
        for (k, v) in &self.options {
            let quoted = v.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!(" {k}=\"{quoted}\""));
        }
        out.push(';');
        out
    }
}

/// One section of a JAAS file: its name and its entries, each with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasSection {
    pub name: String,
    pub entries: Vec<(usize, JaasEntry)>,
}

/// A word (bare or quoted, unquoted here) or one of the punctuation marks `=`, `;`, `{`, `}`,
/// with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tok {
    word: bool,
    text: String,
    line: usize,
}

/// Splits into words and punctuation. With `file` (JAAS file syntax) comments are skipped and
/// braces are punctuation.
fn tokens(text: &str, file: bool) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let punct = |c: char| c == '=' || c == ';' || (file && (c == '{' || c == '}'));
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            line += 1;
            chars.next();
        } else if c.is_whitespace() {
            chars.next();
        } else if file && c == '#' {
            while chars.peek().is_some_and(|&o| o != '\n') {
                chars.next();
            }
        } else if file && c == '/' {
            chars.next();
            match chars.next() {
                Some('/') => {
                    while chars.peek().is_some_and(|&o| o != '\n') {
                        chars.next();
                    }
                }
                Some('*') => {
                    let start = line;
                    let mut prev = ' ';
                    loop {
                        match chars.next() {
                            None => return Err(format!("line {start}: unterminated comment")),
                            Some('/') if prev == '*' => break,
                            Some(o) => {
                                if o == '\n' {
                                    line += 1;
                                }
                                prev = o;
                            }
                        }
                    }
                }
                _ => return Err(format!("line {line}: unexpected '/'")),
            }
        } else if punct(c) {
            chars.next();
            out.push(Tok {
                word: false,
                text: c.to_string(),
                line,
            });
        } else if c == '"' || c == '\'' {
            chars.next();
            let start = line;
            let mut s = String::new();
            loop {
                match chars.next() {
                    None => return Err(unterminated(file, start)),
                    Some('\\') => match chars.next() {
                        Some(e) => s.push(e),
                        None => return Err(unterminated(file, start)),
                    },
                    Some(q) if q == c => break,
                    Some(o) => {
                        if o == '\n' {
                            line += 1;
                        }
                        s.push(o)
                    }
                }
            }
            out.push(Tok {
                word: true,
                text: s,
                line: start,
            });
        } else {
            let mut s = String::new();
            while let Some(&o) = chars.peek() {
                if o.is_whitespace() || punct(o) || o == '"' || o == '\'' {
                    break;
                }
                s.push(o);
                chars.next();
            }
            out.push(Tok {
                word: true,
                text: s,
                line,
            });
        }
    }
    Ok(out)
}

fn unterminated(file: bool, line: usize) -> String {
    if file {
        format!("line {line}: unterminated quoted value")
    } else {
        "unterminated quoted value".into()
    }
}

/// Reads login module entries from `toks[*i..]` up to the end, or (`in_section`) up to a `}`.
fn entries(
    toks: &[Tok],
    i: &mut usize,
    in_section: bool,
) -> Result<Vec<(usize, JaasEntry)>, String> {
    let mut out = Vec::new();
    let at = |t: &Tok| {
        if in_section {
            format!("line {}: ", t.line)
        } else {
            String::new()
        }
    };
    let end = |what: &str| {
        if in_section {
            format!("expected {what}, found the end of the file")
        } else {
            format!("expected {what} at the end")
        }
    };
    loop {
        match toks.get(*i) {
            None if !in_section => return Ok(out),
            Some(t) if in_section && !t.word && t.text == "}" => return Ok(out),
            _ => {}
        }
        let word = |j: usize, what: &str| -> Result<(String, usize), String> {
            match toks.get(j) {
                Some(t) if t.word => Ok((t.text.clone(), t.line)),
                Some(t) => Err(format!("{}expected {what}, found {:?}", at(t), t.text)),
                None => Err(end(what)),
            }
        };
        let (login_module, line) = word(*i, "a login module class")?;
        let flag_what = "a control flag (required, requisite, sufficient, optional)";
        let (flag, _) = word(*i + 1, flag_what)?;
        if !["required", "requisite", "sufficient", "optional"]
            .contains(&flag.to_ascii_lowercase().as_str())
        {
            return Err(format!(
                "{}invalid control flag {flag:?} (required, requisite, sufficient or optional)",
                at(&toks[*i + 1])
            ));
        }
        *i += 2;
        let mut options = BTreeMap::new();
        loop {
            match toks.get(*i) {
                Some(t) if !t.word && t.text == ";" => {
                    *i += 1;
                    break;
                }
                Some(t) if t.word => {
                    let key = &t.text;
                    if !matches!(toks.get(*i + 1), Some(e) if !e.word && e.text == "=") {
                        return Err(format!("{}expected '=' after option {key:?}", at(t)));
                    }
                    let Some(value) = toks.get(*i + 2).filter(|v| v.word) else {
                        return Err(format!(
                            "{}Value not specified for key '{key}' in JAAS config",
                            at(t)
                        ));
                    };
                    options.insert(key.clone(), value.text.clone());
                    *i += 3;
                }
                Some(t) => return Err(format!("{}unexpected {:?}", at(t), t.text)),
                None if in_section => return Err(end("';' after the login module entry")),
                None => return Err("the login module entry does not end with ';'".into()),
            }
        }
        out.push((
            line,
            JaasEntry {
                login_module,
                flag,
                options,
            },
        ));
    }
}

/// Parses one login module entry; Kafka refuses text with no module or with several.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let toks = tokens(text, false)?;
    let mut i = 0;
    let mut found = entries(&toks, &mut i, false)?;
    match found.len() {
        1 => Ok(found.pop().unwrap_or_else(|| unreachable!()).1),
        n => Err(format!(
            "JAAS config property contains {n} login modules, should be 1 module"
        )),
    }
}

/// Parses a JAAS file into its sections. Errors name the line.
pub fn parse_file(text: &str) -> Result<Vec<JaasSection>, String> {
    let toks = tokens(text, true)?;
    let mut sections: Vec<JaasSection> = Vec::new();
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        if !t.word {
            return Err(format!(
                "line {}: expected a section name, found {:?}",
                t.line, t.text
            ));
        }
        let name = t.text.clone();
        if !matches!(toks.get(i + 1), Some(b) if !b.word && b.text == "{") {
            return Err(format!(
                "line {}: expected '{{' after section {name}",
                t.line
            ));
        }
        i += 2;
        let found = entries(&toks, &mut i, true)?;
        // `entries` stopped at the closing brace; a `;` follows it.
        i += 1;
        match toks.get(i) {
            Some(s) if !s.word && s.text == ";" => i += 1,
            _ => return Err(format!("section {name} does not end with '}};'")),
        }
        if sections.iter().any(|s| s.name == name) {
            return Err(format!("line {}: section {name} is given twice", t.line));
        }
        sections.push(JaasSection {
            name,
            entries: found,
        });
    }
    Ok(sections)
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

    #[test]
    fn reads_a_jaas_file() {
        let text = r#"
// The broker's users.
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"   /* a comment
       over two lines */
    user_admin="admin-secret"
    user_alice="alice secret; with \"quotes\"";
    # SCRAM users live in the metadata.
    org.apache.kafka.common.security.scram.ScramLoginModule required;
};
sasl_ssl.KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=bob; };
Client { };
"#;
        let s = parse_file(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "KafkaServer");
        assert_eq!(s[0].entries.len(), 2);
        let (line, plain) = &s[0].entries[0];
        assert_eq!(*line, 4);
        assert_eq!(plain.options["user_alice"], "alice secret; with \"quotes\"");
        assert_eq!(plain.options["password"], "admin-secret");
        assert_eq!(plain.options.len(), 4);
        assert_eq!(s[0].entries[1].0, 11);
        assert_eq!(
            s[0].entries[1].1.login_module,
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        );
        assert_eq!(s[1].name, "sasl_ssl.KafkaServer");
        assert_eq!(s[1].entries[0].1.options["user_bob"], "bob");
        assert!(s[2].entries.is_empty());
        // An entry written back as a property parses to the same entry.
        assert_eq!(parse(&plain.to_config_text()).unwrap(), *plain);
    }

    #[test]
    fn file_errors_name_the_line() {
        let e = parse_file("KafkaServer {\n M required a=;\n};").unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        let e = parse_file("KafkaServer {\n M required a=b\n").unwrap_err();
        assert!(e.contains("end of the file"), "{e}");
        let e = parse_file("KafkaServer\n M required;\n").unwrap_err();
        assert!(e.contains("expected '{' after section KafkaServer"), "{e}");
        let e = parse_file("A { M required; };\nA { M required; };").unwrap_err();
        assert!(e.contains("line 2: section A is given twice"), "{e}");
        let e = parse_file("A { M required; }").unwrap_err();
        assert!(e.contains("does not end with"), "{e}");
        let e = parse_file("A { M required; };\n/* open").unwrap_err();
        assert!(e.contains("line 2: unterminated comment"), "{e}");
        // `#` and `//` are not comments inside a property's text.
        assert!(parse("M required a=\"#x\";").is_ok());
    }
}
