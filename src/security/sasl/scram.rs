//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as Kafka's
//! ScramSaslServer runs them: client-first (`n,[a=authzid],n=name,r=nonce[,ext]`), our
//! server-first (`r=nonce,s=salt,i=iterations`), client-final (`c=..,r=..,p=proof`), then
//! `v=signature`. Credentials are stored as Kafka stores them: salt, StoredKey, ServerKey and
//! the iteration count, never the password. Pure: the caller supplies the credential lookup
//! and the server nonce.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{AuthError, Step};

/// Kafka's minimum and maximum iteration counts (ScramMechanism, ScramControlManager).
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The wire code of AlterUserScramCredentials and DescribeUserScramCredentials
    /// (0 is UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    pub(super) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    pub(super) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's Hi(): PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// What the broker keeps for one user and mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScramCredential(iterations={}, [hidden])",
            self.iterations
        )
    }
}

impl ScramCredential {
    /// The stored form of a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted(
        mech: ScramMechanism,
        salt: &[u8],
        salted: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mech.hmac(salted, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    pub fn from_password(
        mech: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let salted = mech.salted_password(password.as_bytes(), salt, iterations.max(1) as u32);
        Self::from_salted(mech, salt, &salted, iterations)
    }
}

enum State {
    ClientFirst,
    ClientFinal {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
        user: String,
    },
    Done,
}

/// One SCRAM exchange on the server.
pub struct ScramServer {
    mech: ScramMechanism,
    state: State,
}

/// A SCRAM failure that Kafka reports with its generic message (a SaslException).
fn invalid(detail: impl Into<String>) -> Step {
    Step::Failure(AuthError::Credentials(detail.into()))
}

/// `saslname` to user name: `=2C` is ',' and `=3D` is '='; any other '=' is invalid.
fn decode_saslname(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3)?;
        out.push(match esc {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// Printable ASCII except ',' (RFC 5802 `printable`), what a nonce consists of.
fn valid_nonce(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

impl ScramServer {
    pub fn new(mech: ScramMechanism) -> ScramServer {
        ScramServer {
            mech,
            state: State::ClientFirst,
        }
    }

    /// One client message. `lookup` finds a user's credential for this mechanism;
    /// `server_nonce` is this exchange's random part of the nonce.
    pub fn step(
        &mut self,
        token: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Step {
        match std::mem::replace(&mut self.state, State::Done) {
            State::ClientFirst => self.client_first(token, lookup, server_nonce),
            State::ClientFinal {
                client_first_bare,
                server_first,
                nonce,
                credential,
                user,
            } => self.client_final(
                token,
                &client_first_bare,
                &server_first,
                &nonce,
                &credential,
                user,
            ),
            State::Done => invalid("unexpected SCRAM message after the exchange ended"),
        }
    }

    fn client_first(
        &mut self,
        token: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Step {
        let Ok(msg) = std::str::from_utf8(token) else {
            return invalid("client-first message is not UTF-8");
        };
        // gs2-header: "n," (no channel binding), then an optional "a=authzid", then ','.
        let Some(rest) = msg.strip_prefix("n,") else {
            return invalid(format!("invalid SCRAM client first message {msg:?}"));
        };
        let Some((authz, bare)) = rest.split_once(',') else {
            return invalid(format!("invalid SCRAM client first message {msg:?}"));
        };
        let authz = match authz {
            "" => None,
            a => match a.strip_prefix("a=").and_then(decode_saslname) {
                Some(a) => Some(a),
                None => return invalid(format!("invalid authorization id in {msg:?}")),
            },
        };
        let mut fields = bare.split(',');
        let name = fields.next().and_then(|f| f.strip_prefix("n="));
        let nonce = fields.next().and_then(|f| f.strip_prefix("r="));
        let (Some(name), Some(nonce)) = (name, nonce) else {
            return invalid(format!("invalid SCRAM client first message {msg:?}"));
        };
        if !valid_nonce(nonce) {
            return invalid("invalid client nonce");
        }
        // Extensions (`tokenauth=true` for delegation tokens) are ignored as Kafka ignores
        // the ones it does not support; delegation tokens are not served.
        let Some(user) = decode_saslname(name) else {
            return invalid(format!("invalid user name {name:?}"));
        };
        let Some(credential) = lookup(&user) else {
            return invalid("Authentication failed: Invalid user credentials");
        };
        if let Some(a) = &authz
            && *a != user
        {
            return Step::Failure(AuthError::Client(
                "Authentication failed: Client requested an authorization id that is different from username"
                    .into(),
            ));
        }
        if credential.iterations < MIN_ITERATIONS {
            return invalid(format!(
                "Iterations {} is less than the minimum {MIN_ITERATIONS} for {}",
                credential.iterations,
                self.mech.name()
            ));
        }
        let full_nonce = format!("{nonce}{server_nonce}");
        let server_first = format!(
            "r={full_nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let out = server_first.clone().into_bytes();
        self.state = State::ClientFinal {
            client_first_bare: bare.to_string(),
            server_first,
            nonce: full_nonce,
            credential,
            user,
        };
        Step::Challenge(out)
    }

    fn client_final(
        &mut self,
        token: &[u8],
        client_first_bare: &str,
        server_first: &str,
        nonce: &str,
        credential: &ScramCredential,
        user: String,
    ) -> Step {
        let Ok(msg) = std::str::from_utf8(token) else {
            return invalid("client-final message is not UTF-8");
        };
        let Some((without_proof, proof)) = msg.rsplit_once(",p=") else {
            return invalid("invalid SCRAM client final message");
        };
        let mut fields = without_proof.split(',');
        let channel = fields.next().and_then(|f| f.strip_prefix("c="));
        let got_nonce = fields.next().and_then(|f| f.strip_prefix("r="));
        let (Some(channel), Some(got_nonce)) = (channel, got_nonce) else {
            return invalid("invalid SCRAM client final message");
        };
        if B64.decode(channel).is_err() {
            return invalid("invalid channel binding");
        }
        if got_nonce != nonce {
            return invalid("Invalid client nonce in the final client message.");
        }
        let Ok(proof) = B64.decode(proof) else {
            return invalid("invalid client proof");
        };
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = self
            .mech
            .hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return invalid("Invalid client credentials");
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let computed = self.mech.hash(&client_key);
        if !constant_time_eq(&computed, &credential.stored_key) {
            return invalid("Invalid client credentials");
        }
        let server_signature = self
            .mech
            .hmac(&credential.server_key, auth_message.as_bytes());
        Step::Success {
            response: format!("v={}", B64.encode(server_signature)).into_bytes(),
            authorization_id: user,
            credential_expiry_ms: None,
        }
    }
}

pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn rfc7677_sha256_exchange() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let lookup = |u: &str| (u == "user").then(|| cred.clone());
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        let Step::Challenge(first) = s.step(
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            &lookup,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        ) else {
            panic!("no challenge")
        };
        assert_eq!(
            String::from_utf8(first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let step = s.step(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            &lookup,
            "",
        );
        let Step::Success {
            response,
            authorization_id,
            ..
        } = step
        else {
            panic!("not a success")
        };
        assert_eq!(
            String::from_utf8(response).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        assert_eq!(authorization_id, "user");
    }

    /// A client side written from RFC 5802 against the server, for SHA-512.
    fn client_run(mech: ScramMechanism, stored_pw: &str, client_pw: &str) -> Step {
        let salt = b"0123456789abcdef".to_vec();
        let cred = ScramCredential::from_password(mech, stored_pw, &salt, 4096);
        let lookup = |u: &str| (u == "a,b=c").then(|| cred.clone());
        let mut s = ScramServer::new(mech);
        let bare = "n=a=2Cb=3Dc,r=clientnonce";
        let Step::Challenge(first) = s.step(format!("n,,{bare}").as_bytes(), &lookup, "srv") else {
            panic!("no challenge")
        };
        let first = String::from_utf8(first).unwrap();
        let without_proof = "c=biws,r=clientnoncesrv";
        let salted = mech.salted_password(client_pw.as_bytes(), &salt, 4096);
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored = mech.hash(&client_key);
        let auth = format!("{bare},{first},{without_proof}");
        let sig = mech.hmac(&stored, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        s.step(
            format!("{without_proof},p={}", B64.encode(proof)).as_bytes(),
            &lookup,
            "",
        )
    }

    #[test]
    fn sha512_round_trip_and_wrong_password() {
        assert!(matches!(
            client_run(ScramMechanism::Sha512, "pw", "pw"),
            Step::Success { ref authorization_id, .. } if authorization_id == "a,b=c"
        ));
        assert!(matches!(
            client_run(ScramMechanism::Sha512, "pw", "bad"),
            Step::Failure(AuthError::Credentials(_))
        ));
    }

    #[test]
    fn malformed_and_unknown_users_fail_without_panicking() {
        let lookup = |_: &str| None;
        for msg in [
            &b""[..],
            b"n",
            b"n,",
            b"y,,n=u,r=x",
            b"n,,n=u",
            b"n,,n=u,r=",
            b"n,,n=bad=escape,r=abc",
            b"\xff\xfe",
            b"n,,n=nobody,r=abc",
        ] {
            let mut s = ScramServer::new(ScramMechanism::Sha256);
            assert!(
                matches!(s.step(msg, &lookup, "n"), Step::Failure(_)),
                "{msg:?}"
            );
        }
        let cred = ScramCredential::from_password(ScramMechanism::Sha256, "p", b"s", 4096);
        let lookup = |_: &str| Some(cred.clone());
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.step(b"n,,n=u,r=abc", &lookup, "n"),
            Step::Challenge(_)
        ));
        assert!(matches!(
            s.step(b"c=biws,r=abcn", &lookup, ""),
            Step::Failure(_)
        ));
        assert!(matches!(s.step(b"x", &lookup, ""), Step::Failure(_)));
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.step(b"n,a=other,n=u,r=abc", &lookup, "n"),
            Step::Failure(AuthError::Client(_))
        ));
    }
}
