//! The client side of SASL, for this broker's connections to the other brokers of a cluster
//! over a SASL inter-broker listener (`sasl.mechanism.inter.broker.protocol`). The login is
//! the `username` and `password` options of the listener's JAAS entry for that mechanism, as
//! Kafka's broker logs in with them. PLAIN sends one token; SCRAM (RFC 5802) sends its
//! client-first and client-final messages and checks the server's signature. Pure: the
//! connection carries the tokens (SaslHandshake, then SaslAuthenticate).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::Mechanism;
use super::config::KeyError;
use super::jaas;
use super::scram::{ScramMechanism, constant_time_eq};

/// How this broker authenticates to the others.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientLogin {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for ClientLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ClientLogin({} as {})",
            self.mechanism.name(),
            self.username
        )
    }
}

impl ClientLogin {
    /// The login for listener `listener`: `mechanism` (Kafka's
    /// `sasl.mechanism.inter.broker.protocol`) must be enabled on it, and its JAAS entry
    /// (`listener.name.<l>.<mechanism>.sasl.jaas.config`) must give `username` and `password`.
    pub fn parse(
        listener: &str,
        mechanism: &str,
        enabled: &[Mechanism],
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ClientLogin, KeyError> {
        let mkey = "sasl.mechanism.inter.broker.protocol".to_string();
        let Some(mech) = Mechanism::from_name(mechanism.trim()) else {
            return Err((
                mkey,
                format!(
                    "SASL mechanism {mechanism} is not supported by Sluice between brokers \
                     (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)"
                ),
            ));
        };
        if mech == Mechanism::OAuthBearer {
            return Err((
                mkey,
                "OAUTHBEARER is not supported by Sluice between brokers (PLAIN, SCRAM-SHA-256 \
                 and SCRAM-SHA-512 are)"
                    .into(),
            ));
        }
        if !enabled.contains(&mech) {
            return Err((
                mkey,
                format!(
                    "{} is not enabled on the inter-broker listener {listener}",
                    mech.name()
                ),
            ));
        }
        let key = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            listener.to_ascii_lowercase(),
            mech.name().to_ascii_lowercase()
        );
        let text = get(&key).ok_or_else(|| {
            (
                key.clone(),
                "the inter-broker login needs username and password options".to_string(),
            )
        })?;
        let entry =
            jaas::parse(&text).map_err(|e| (key.clone(), format!("invalid JAAS config: {e}")))?;
        let opt = |name: &str| {
            entry.options.get(name).cloned().ok_or_else(|| {
                (
                    key.clone(),
                    format!("no {name} option: the broker logs in to the others with it"),
                )
            })
        };
        Ok(ClientLogin {
            mechanism: mech,
            username: opt("username")?,
            password: opt("password")?,
        })
    }

    /// A new exchange; `nonce` is the SCRAM client nonce (printable, no comma).
    pub fn start(&self, nonce: String) -> ClientExchange {
        ClientExchange {
            login: self.clone(),
            nonce,
            state: ClientState::Start,
        }
    }
}

enum ClientState {
    Start,
    /// Client-first sent (its bare part kept).
    ScramFirst(String),
    /// Client-final sent: the server signature expected.
    ScramFinal(Vec<u8>),
    Done,
}

/// One client exchange: [`ClientExchange::step`] with the server's last token (empty at the
/// start) gives the next client token, or None when the exchange is complete.
pub struct ClientExchange {
    login: ClientLogin,
    nonce: String,
    state: ClientState,
}

/// `=` and `,` escaped in a SCRAM user name (RFC 5802 saslname).
fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

impl ClientExchange {
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let scram = match self.login.mechanism {
            Mechanism::Scram(m) => Some(m),
            _ => None,
        };
        match (std::mem::replace(&mut self.state, ClientState::Done), scram) {
            (ClientState::Start, None) => {
                let l = &self.login;
                Ok(Some(
                    format!("\0{}\0{}", l.username, l.password).into_bytes(),
                ))
            }
            (ClientState::Start, Some(_)) => {
                let bare = format!("n={},r={}", saslname(&self.login.username), self.nonce);
                let first = format!("n,,{bare}").into_bytes();
                self.state = ClientState::ScramFirst(bare);
                Ok(Some(first))
            }
            (ClientState::ScramFirst(bare), Some(m)) => {
                let (reply, signature) = self.client_final(m, &bare, server)?;
                self.state = ClientState::ScramFinal(signature);
                Ok(Some(reply))
            }
            (ClientState::ScramFinal(expected), Some(_)) => {
                let text = std::str::from_utf8(server).map_err(|_| "server-final is not UTF-8")?;
                if let Some(e) = text.strip_prefix("e=") {
                    return Err(format!("the server refused the login: {e}"));
                }
                let v = text
                    .split(',')
                    .find_map(|a| a.strip_prefix("v="))
                    .ok_or("server-final has no signature")?;
                let v = B64
                    .decode(v)
                    .map_err(|_| "server-final signature is not base64")?;
                if !constant_time_eq(&v, &expected) {
                    return Err("the server's SCRAM signature is wrong".into());
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// The client-final message for `server_first`, and the server signature to expect.
    fn client_final(
        &self,
        m: ScramMechanism,
        bare: &str,
        server_first: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let text = std::str::from_utf8(server_first).map_err(|_| "server-first is not UTF-8")?;
        let attr = |k: &str| {
            text.split(',')
                .find_map(|a| a.strip_prefix(k))
                .ok_or_else(|| format!("server-first has no {k}"))
        };
        let nonce = attr("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("server-first nonce does not extend ours".into());
        }
        let salt = B64
            .decode(attr("s=")?)
            .map_err(|_| "server-first salt is not base64")?;
        let iterations: u32 = attr("i=")?
            .parse()
            .map_err(|_| "server-first iteration count is not a number")?;
        if iterations == 0 || iterations > super::scram::MAX_ITERATIONS as u32 {
            return Err(format!(
                "server-first iteration count {iterations} out of range"
            ));
        }
        let salted = m.salted_password(self.login.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{bare},{text},{without_proof}");
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        let server_signature = m.hmac(&server_key, auth_message.as_bytes());
        let reply = format!("{without_proof},p={}", B64.encode(proof)).into_bytes();
        Ok((reply, server_signature))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::scram::{ScramCredential, ScramServer};
    use crate::security::sasl::{Step, plain};

    fn login(mech: Mechanism) -> ClientLogin {
        ClientLogin {
            mechanism: mech,
            username: "broker".into(),
            password: "broker-secret".into(),
        }
    }

    #[test]
    fn plain_token_is_what_the_server_accepts() {
        let mut x = login(Mechanism::Plain).start(String::new());
        let token = x.step(b"").unwrap().unwrap();
        let users = [("broker".to_string(), "broker-secret".to_string())].into();
        assert!(matches!(
            plain::authenticate(&token, &users),
            Step::Success { .. }
        ));
    }

    #[test]
    fn scram_client_and_server_agree() {
        for m in ScramMechanism::ALL {
            let cred = ScramCredential::from_password(m, "broker-secret", b"salty", 4096);
            let mut server = ScramServer::new(m);
            let mut client = login(Mechanism::Scram(m)).start("clientnonce".into());
            let first = client.step(b"").unwrap().unwrap();
            let lookup = |u: &str| (u == "broker").then(|| cred.clone());
            let Step::Challenge(sf) = server.step(&first, &lookup, "servernonce") else {
                panic!("no server-first");
            };
            let fin = client.step(&sf).unwrap().unwrap();
            let Step::Success {
                response,
                authorization_id,
                ..
            } = server.step(&fin, &lookup, "servernonce")
            else {
                panic!("{m:?}: the server refused the proof");
            };
            assert_eq!(authorization_id, "broker");
            assert_eq!(client.step(&response).unwrap(), None);
        }
    }

    #[test]
    fn scram_wrong_server_signature_is_refused() {
        let m = ScramMechanism::Sha512;
        let mut client = login(Mechanism::Scram(m)).start("abc".into());
        client.step(b"").unwrap();
        let sf = format!("r=abcdef,s={},i=4096", B64.encode(b"salt"));
        client.step(sf.as_bytes()).unwrap();
        let bad = format!("v={}", B64.encode([0u8; 64]));
        assert!(client.step(bad.as_bytes()).is_err());
        let mut client = login(Mechanism::Scram(m)).start("abc".into());
        client.step(b"").unwrap();
        assert!(
            client.step(b"r=xyz,s=c2FsdA==,i=4096").is_err(),
            "foreign nonce"
        );
    }

    #[test]
    fn login_comes_from_the_listener_jaas_entry() {
        let get = |k: &str| {
            (k == "listener.name.sasl_ssl.plain.sasl.jaas.config").then(|| {
                "org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\";"
                    .to_string()
            })
        };
        let l = ClientLogin::parse("SASL_SSL", "PLAIN", &[Mechanism::Plain], &get).unwrap();
        assert_eq!(
            (l.username.as_str(), l.password.as_str()),
            ("admin", "admin-secret")
        );
        let e = ClientLogin::parse("SASL_SSL", "GSSAPI", &[Mechanism::Plain], &get).unwrap_err();
        assert_eq!(e.0, "sasl.mechanism.inter.broker.protocol");
        let e =
            ClientLogin::parse("SASL_SSL", "SCRAM-SHA-512", &[Mechanism::Plain], &get).unwrap_err();
        assert!(e.1.contains("not enabled"), "{e:?}");
    }
}
