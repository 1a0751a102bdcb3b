//! A SASL listener's settings, with Kafka's property names: the mechanisms
//! (`listener.name.<l>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms`), one JAAS
//! entry per mechanism (`listener.name.<l>.<mechanism>.sasl.jaas.config`: PLAIN's users,
//! OAUTHBEARER's unsecured validator options), `connections.max.reauth.ms`,
//! `connection.failed.authentication.delay.ms` and `sasl.server.max.receive.size`. Pure.

use std::collections::BTreeMap;

use super::Mechanism;
use super::jaas;
use super::oauthbearer::UnsecuredOptions;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslListener {
    /// The listener name, upper case ("SASL_PLAINTEXT").
    pub listener: String,
    /// Enabled mechanisms in the configured order (what a SaslHandshake answer lists).
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (`user_<name>="<password>"`).
    pub plain_users: BTreeMap<String, String>,
    pub oauth: UnsecuredOptions,
    /// `connections.max.reauth.ms`: 0 means sessions do not expire.
    pub max_reauth_ms: i64,
    pub failed_auth_delay_ms: u64,
    /// Largest frame read before a connection is authenticated.
    pub max_receive_size: usize,
}

/// A configuration error: the key and what is wrong with it.
pub type KeyError = (String, String);

const LOGIN_MODULES: &[(&str, &[&str])] = &[
    (
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        &["PLAIN"],
    ),
    (
        "org.apache.kafka.common.security.scram.ScramLoginModule",
        &["SCRAM-SHA-256", "SCRAM-SHA-512"],
    ),
    (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        &["OAUTHBEARER"],
    ),
];

impl SaslListener {
    /// Reads the settings of listener `name`; `get` gives a property's value (as set, else
    /// its default; None when neither).
    pub fn parse(
        name: &str,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SaslListener, KeyError> {
        let prefix = format!("listener.name.{}.", name.to_ascii_lowercase());
        let own = format!("{prefix}sasl.enabled.mechanisms");
        let (key, list) = match get(&own) {
            Some(v) => (own, v),
            None => (
                "sasl.enabled.mechanisms".to_string(),
                get("sasl.enabled.mechanisms").unwrap_or_default(),
            ),
        };
        let mut mechanisms = Vec::new();
        for m in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let Some(mech) = Mechanism::from_name(m) else {
                return Err((
                    key,
                    format!(
                        "SASL mechanism {m} is not supported by Sluice (PLAIN, SCRAM-SHA-256, \
                         SCRAM-SHA-512 and OAUTHBEARER are)"
                    ),
                ));
            };
            if !mechanisms.contains(&mech) {
                mechanisms.push(mech);
            }
        }
        if mechanisms.is_empty() {
            return Err((
                key,
                format!("no SASL mechanism enabled for listener {name}"),
            ));
        }
        let mut plain_users = BTreeMap::new();
        let mut oauth = UnsecuredOptions::default();
        for mech in &mechanisms {
            let key = format!(
                "{prefix}{}.sasl.jaas.config",
                mech.name().to_ascii_lowercase()
            );
            let Some(text) = get(&key) else {
                if *mech == Mechanism::Plain {
                    return Err((
                        key,
                        "PLAIN needs a PlainLoginModule entry with its users (user_<name>=\"<password>\")"
                            .into(),
                    ));
                }
                continue;
            };
            let entry = jaas::parse(&text)
                .map_err(|e| (key.clone(), format!("invalid JAAS config: {e}")))?;
            match LOGIN_MODULES
                .iter()
                .find(|(class, _)| *class == entry.login_module)
            {
                Some((_, mechs)) if mechs.contains(&mech.name()) => {}
                Some(_) => {
                    return Err((
                        key,
                        format!(
                            "login module {} does not serve {}",
                            entry.login_module,
                            mech.name()
                        ),
                    ));
                }
                None => {
                    return Err((key, format!("unknown login module {}", entry.login_module)));
                }
            }
            match mech {
                Mechanism::Plain => {
                    plain_users = entry
                        .options
                        .iter()
                        .filter_map(|(k, v)| {
                            Some((k.strip_prefix("user_")?.to_string(), v.clone()))
                        })
                        .collect();
                }
                Mechanism::OAuthBearer => {
                    oauth = UnsecuredOptions::from_jaas(&entry.options)
                        .map_err(|e| (key.clone(), e))?;
                }
                Mechanism::Scram(_) => {}
            }
        }
        let num = |k: &str, min: i64| -> Result<i64, KeyError> {
            let v = get(k).unwrap_or_default();
            match v.trim().parse::<i64>() {
                Ok(n) if n >= min => Ok(n),
                _ => Err((
                    k.to_string(),
                    format!("invalid value {v:?} (at least {min})"),
                )),
            }
        };
        Ok(SaslListener {
            listener: name.to_string(),
            mechanisms,
            plain_users,
            oauth,
            max_reauth_ms: num("connections.max.reauth.ms", 0)?,
            failed_auth_delay_ms: num("connection.failed.authentication.delay.ms", 0)? as u64,
            max_receive_size: num("sasl.server.max.receive.size", 1)? as usize,
        })
    }

    pub fn enabled(&self, m: Mechanism) -> bool {
        self.mechanisms.contains(&m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let mut m: BTreeMap<String, String> = [
            ("sasl.enabled.mechanisms", "GSSAPI"),
            ("connections.max.reauth.ms", "0"),
            ("connection.failed.authentication.delay.ms", "100"),
            ("sasl.server.max.receive.size", "524288"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in pairs {
            m.insert(k.to_string(), v.to_string());
        }
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn reads_mechanisms_and_jaas_per_listener() {
        let get = props(&[
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512,OAUTHBEARER"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="alice-secret";"#,
            ),
            ("connections.max.reauth.ms", "5000"),
        ]);
        let l = SaslListener::parse("SASL_PLAINTEXT", &get).unwrap();
        assert_eq!(l.mechanisms.len(), 3);
        assert_eq!(l.plain_users["alice"], "alice-secret");
        assert_eq!(l.plain_users.len(), 2);
        assert_eq!(l.max_reauth_ms, 5000);
        assert_eq!(l.max_receive_size, 524288);
    }

    #[test]
    fn errors_name_the_key() {
        let e = SaslListener::parse("SASL_PLAINTEXT", &props(&[])).unwrap_err();
        assert_eq!(e.0, "sasl.enabled.mechanisms");
        assert!(e.1.contains("GSSAPI"), "{}", e.1);
        let e = SaslListener::parse(
            "SASL_PLAINTEXT",
            &props(&[
                (
                    "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
                    "PLAIN",
                ),
                (
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                    "Broken required a=;",
                ),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.0, "listener.name.sasl_plaintext.plain.sasl.jaas.config");
        assert!(e.1.contains("invalid JAAS config"), "{}", e.1);
        let e = SaslListener::parse(
            "SASL_PLAINTEXT",
            &props(&[
                ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
                (
                    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required;",
                ),
            ]),
        )
        .unwrap_err();
        assert!(e.1.contains("does not serve SCRAM-SHA-256"), "{}", e.1);
    }
}
