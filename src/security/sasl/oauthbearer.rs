//! SASL/OAUTHBEARER (RFC 7628) with unsecured JWTs (`alg: none`), for development, as
//! Kafka's OAuthBearerSaslServer with its OAuthBearerUnsecuredValidatorCallbackHandler:
//! the client's first message carries `auth=Bearer <token>`; the token is
//! `base64url(header).base64url(claims).` with no signature; the principal is the `sub`
//! claim (`unsecuredValidatorPrincipalClaimName`), `exp` must lie ahead (with
//! `unsecuredValidatorAllowableClockSkewMs`), `iat` must not lie ahead, and the scope must
//! hold `unsecuredValidatorRequiredScope`. An invalid token gets the JSON error challenge
//! (`{"status":"invalid_token"}`); the client answers it with 0x01 and then fails with that
//! message. Pure: the caller passes the time.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::{AuthError, Step};

/// The unsecured validator's options, from the listener's OAuthBearerLoginModule entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredOptions {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredOptions {
    fn default() -> Self {
        UnsecuredOptions {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

impl UnsecuredOptions {
    pub fn from_jaas(options: &BTreeMap<String, String>) -> Result<UnsecuredOptions, String> {
        let mut o = UnsecuredOptions::default();
        if let Some(v) = options.get("unsecuredValidatorPrincipalClaimName")
            && !v.trim().is_empty()
        {
            o.principal_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorScopeClaimName")
            && !v.trim().is_empty()
        {
            o.scope_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorRequiredScope") {
            o.required_scope = v
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = options.get("unsecuredValidatorAllowableClockSkewMs") {
            o.clock_skew_ms = v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| {
                    format!("Invalid value for unsecuredValidatorAllowableClockSkewMs: {v}")
                })?;
        }
        Ok(o)
    }
}

/// One OAUTHBEARER exchange: the client's first message, possibly an error challenge, then
/// the client's 0x01 after it.
#[derive(Default)]
pub struct OAuthBearerServer {
    error: Option<String>,
}

const KVSEP: char = '\u{1}';

impl OAuthBearerServer {
    pub fn step(&mut self, token: &[u8], options: &UnsecuredOptions, now_ms: i64) -> Step {
        if token == [0x01]
            && let Some(e) = self.error.take()
        {
            return Step::Failure(AuthError::Client(e));
        }
        self.error = None;
        let Some((authz, jwt)) = std::str::from_utf8(token).ok().and_then(parse_initial) else {
            return Step::Failure(AuthError::Credentials(
                "Invalid OAUTHBEARER client first message".into(),
            ));
        };
        match validate(&jwt, options, now_ms) {
            Err(status) => {
                let msg = status.json();
                self.error = Some(msg.clone());
                Step::Challenge(msg.into_bytes())
            }
            Ok((principal, exp_ms)) => {
                if !authz.is_empty() && authz != principal {
                    return Step::Failure(AuthError::Client(format!(
                        "Authentication failed: Client requested an authorization id ({authz}) that is different from the token's principal name ({principal})"
                    )));
                }
                Step::Success {
                    response: Vec::new(),
                    authorization_id: principal,
                    credential_expiry_ms: Some(exp_ms),
                }
            }
        }
    }
}

/// `n,[a=authzid],` 0x01 `key=value` 0x01 ... 0x01 0x01 with `auth=Bearer <token>` among the
/// pairs: the authorization id and the token.
fn parse_initial(msg: &str) -> Option<(String, String)> {
    let rest = msg.strip_prefix("n,")?;
    let (authz, rest) = rest.split_once(',')?;
    let authz = if authz.is_empty() {
        String::new()
    } else {
        authz.strip_prefix("a=")?.to_string()
    };
    let pairs = rest
        .strip_prefix(KVSEP)?
        .strip_suffix(KVSEP)?
        .strip_suffix(KVSEP)?;
    let mut token = None;
    for pair in pairs.split(KVSEP) {
        let (k, v) = pair.split_once('=')?;
        if k == "auth" {
            let (scheme, t) = v.split_once(' ')?;
            let t = t.trim_start_matches(' ');
            if !scheme.eq_ignore_ascii_case("bearer")
                || t.is_empty()
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                return None;
            }
            token = Some(t.to_string());
        }
    }
    Some((authz, token?))
}

enum Invalid {
    Token,
    Scope(String),
}

impl Invalid {
    fn json(&self) -> String {
        match self {
            Invalid::Token => r#"{"status":"invalid_token"}"#.to_string(),
            Invalid::Scope(s) => format!(r#"{{"status":"insufficient_scope", "scope":"{s}"}}"#),
        }
    }
}

/// The principal and the expiry (ms since the epoch) of a valid unsecured JWT.
fn validate(jwt: &str, o: &UnsecuredOptions, now_ms: i64) -> Result<(String, i64), Invalid> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, sig] = parts.as_slice() else {
        return Err(Invalid::Token);
    };
    if !sig.is_empty() {
        return Err(Invalid::Token);
    }
    let json = |s: &str| -> Result<serde_json::Map<String, Value>, Invalid> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|_| Invalid::Token)?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(Invalid::Token),
        }
    };
    let header = json(header)?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err(Invalid::Token);
    }
    let claims = json(claims)?;
    let seconds = |name: &str| {
        claims
            .get(name)
            .and_then(Value::as_f64)
            .map(|s| (s * 1000.0) as i64)
    };
    let principal = match claims.get(&o.principal_claim) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(Invalid::Token),
    };
    let Some(exp_ms) = seconds("exp") else {
        return Err(Invalid::Token);
    };
    if now_ms - o.clock_skew_ms >= exp_ms {
        return Err(Invalid::Token);
    }
    if let Some(iat) = seconds("iat")
        && iat > now_ms + o.clock_skew_ms
    {
        return Err(Invalid::Token);
    }
    if !o.required_scope.is_empty() {
        let scope: Vec<String> = match claims.get(&o.scope_claim) {
            Some(Value::String(s)) => s.split(' ').map(str::to_string).collect(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        if !o.required_scope.iter().all(|r| scope.contains(r)) {
            return Err(Invalid::Scope(o.required_scope.join(" ")));
        }
    }
    Ok((principal, exp_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(claims: &str) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    fn first(t: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn valid_token_gives_sub_and_expiry() {
        let mut s = OAuthBearerServer::default();
        let t = token(r#"{"sub":"alice","exp":2000,"iat":1000}"#);
        match s.step(&first(&t), &UnsecuredOptions::default(), 1_500_000) {
            Step::Success {
                authorization_id,
                credential_expiry_ms,
                ..
            } => {
                assert_eq!(authorization_id, "alice");
                assert_eq!(credential_expiry_ms, Some(2_000_000));
            }
            _ => panic!("refused"),
        }
    }

    #[test]
    fn expired_token_gets_the_error_challenge_then_fails() {
        let mut s = OAuthBearerServer::default();
        let t = token(r#"{"sub":"alice","exp":1000}"#);
        let o = UnsecuredOptions::default();
        let Step::Challenge(c) = s.step(&first(&t), &o, 1_000_000) else {
            panic!("no challenge")
        };
        assert_eq!(c, br#"{"status":"invalid_token"}"#);
        assert!(matches!(
            s.step(&[1], &o, 1_000_000),
            Step::Failure(AuthError::Client(ref m)) if m == r#"{"status":"invalid_token"}"#
        ));
    }

    #[test]
    fn scope_skew_and_malformed() {
        let o = UnsecuredOptions::from_jaas(
            &[
                (
                    "unsecuredValidatorRequiredScope".to_string(),
                    "write".to_string(),
                ),
                (
                    "unsecuredValidatorAllowableClockSkewMs".to_string(),
                    "5000".to_string(),
                ),
            ]
            .into(),
        )
        .unwrap();
        let mut s = OAuthBearerServer::default();
        let t = token(r#"{"sub":"a","exp":1000,"scope":"read"}"#);
        assert!(matches!(
            s.step(&first(&t), &o, 1_004_000),
            Step::Challenge(_)
        ));
        let t = token(r#"{"sub":"a","exp":1000,"scope":"read write"}"#);
        assert!(matches!(
            s.step(&first(&t), &o, 1_004_000),
            Step::Success { .. }
        ));
        for bad in [
            &b""[..],
            b"n,,",
            b"n,,\x01auth=Basic x\x01\x01",
            b"\xff",
            b"\x01",
        ] {
            assert!(matches!(s.step(bad, &o, 0), Step::Failure(_)), "{bad:?}");
        }
        let t = format!(
            "{}.{}.sig",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode("{}")
        );
        assert!(matches!(s.step(&first(&t), &o, 0), Step::Challenge(_)));
        assert!(
            UnsecuredOptions::from_jaas(
                &[(
                    "unsecuredValidatorAllowableClockSkewMs".to_string(),
                    "x".to_string()
                )]
                .into()
            )
            .is_err()
        );
    }
}
