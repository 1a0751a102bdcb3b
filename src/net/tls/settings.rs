//! A TLS listener's settings, read as Kafka reads them: `listener.name.<listener>.ssl.*` wins
//! over `ssl.*`, which wins over Kafka's default. Everything is loaded and checked at start-up;
//! an error names the key (and where it was set, and the file it points to).
//!
//! Key material is PEM only (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`): a keystore
//! file holding the private key and the certificate chain (`ssl.keystore.location`), or both
//! inline (`ssl.keystore.key`, `ssl.keystore.certificate.chain`); the key may be an encrypted
//! PKCS#8 key (`ssl.key.password`). Trust anchors come from `ssl.truststore.location` or
//! `ssl.truststore.certificates`.

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::principal::PrincipalMapper;
use crate::config::BrokerConfig;
use crate::config::keys::default_of;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// What a TLS listener needs at run time.
pub struct TlsSettings {
    pub server: Arc<ServerConfig>,
    pub client_auth: ClientAuth,
    pub mapper: PrincipalMapper,
}

/// Reads one listener's values, tracking which key each came from.
pub(super) struct Lookup<'a> {
    pub(super) config: &'a BrokerConfig,
    /// `listener.name.<listener>.`, lower-cased as Kafka writes it.
    pub(super) prefix: String,
}

impl Lookup<'_> {
    /// The key that gives `prop` its value (prefixed, plain, or the plain key's default), and
    /// the value (None for Kafka's null or an empty value).
    pub(super) fn get(&self, prop: &str) -> (String, Option<String>) {
        let prefixed = format!("{}{prop}", self.prefix);
        if let Some((k, v)) = self
            .config
            .raw
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&prefixed))
        {
            return (k.clone(), non_empty(v));
        }
        self.plain(prop)
    }

    /// The un-prefixed key only (Kafka reads `ssl.client.auth` of a SASL_SSL listener from its
    /// prefixed key alone).
    fn plain(&self, prop: &str) -> (String, Option<String>) {
        let v = self
            .config
            .raw
            .get(prop)
            .map(String::as_str)
            .or_else(|| default_of(prop));
        (prop.to_string(), v.and_then(non_empty))
    }

    fn prefixed_only(&self, prop: &str) -> (String, Option<String>) {
        let prefixed = format!("{}{prop}", self.prefix);
        match self
            .config
            .raw
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&prefixed))
        {
            Some((k, v)) => (k.clone(), non_empty(v)),
            None => (prefixed, None),
        }
    }

    /// An error about `key`, prefixed with where it was set.
    pub(super) fn err(&self, key: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        match self.config.origin(key) {
            Some(origin) => anyhow!("{origin}: {key}: {msg}"),
            None => anyhow!("{key}: {msg}"),
        }
    }
}

fn non_empty(v: &str) -> Option<String> {
    let t = v.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Loads the settings of the TLS listener `listener` (security protocol `protocol`: SSL or
/// SASL_SSL).
pub fn load(config: &BrokerConfig, listener: &str, protocol: &str) -> Result<TlsSettings> {
    let l = Lookup {
        config,
        prefix: format!("listener.name.{}.", listener.to_ascii_lowercase()),
    };
    let provider = Arc::new(provider(&l)?);
    let versions = protocol_versions(&l)?;
    let client_auth = client_auth(&l, protocol)?;
    let (chain, key) = keystore(&l)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| l.err(&l.get("ssl.enabled.protocols").0, e))?;
    let builder = if client_auth == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let (key, roots) = truststore(&l)?;
        let Some(roots) = roots else {
            let (auth_key, auth) = l.get("ssl.client.auth");
            return Err(l.err(
                &auth_key,
                format!(
                    "{} needs the certificates that sign client certificates: set {key} or \
                     ssl.truststore.certificates (listener {listener})",
                    auth.unwrap_or_default()
                ),
            ));
        };
        let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let b = if client_auth == ClientAuth::Requested {
            b.allow_unauthenticated()
        } else {
            b
        };
        builder.with_client_cert_verifier(b.build().map_err(|e| l.err(&key, e))?)
    };
    let chain_key = l.get("ssl.keystore.location").0;
    let mut server = builder.with_single_cert(chain, key).map_err(|e| {
        l.err(
            &chain_key,
            format!("the key does not suit the certificate: {e}"),
        )
    })?;
    // Kafka speaks no ALPN; clients offer none.
    server.alpn_protocols.clear();
    let (rules_key, rules) = l.get("ssl.principal.mapping.rules");
    let mapper = PrincipalMapper::parse(rules.as_deref().unwrap_or("DEFAULT"))
        .map_err(|e| l.err(&rules_key, e))?;
    Ok(TlsSettings {
        server: Arc::new(server),
        client_auth,
        mapper,
    })
}

/// ring's suites, narrowed to `ssl.cipher.suites` when it is set (IANA names, which Java uses:
/// TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...).
pub(super) fn provider(l: &Lookup<'_>) -> Result<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    let (key, wanted) = l.get("ssl.cipher.suites");
    let Some(wanted) = wanted else {
        return Ok(p);
    };
    let iana = |s: &rustls::SupportedCipherSuite| {
        let name = s.suite().as_str().unwrap_or("");
        name.strip_prefix("TLS13_")
            .map_or_else(|| name.to_string(), |rest| format!("TLS_{rest}"))
    };
    let mut chosen = Vec::new();
    for name in wanted.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match p.cipher_suites.iter().find(|s| iana(s) == name) {
            Some(s) => chosen.push(*s),
            None => {
                let known: Vec<String> = p.cipher_suites.iter().map(iana).collect();
                return Err(l.err(
                    &key,
                    format!(
                        "{name} is not a cipher suite Sluice offers ({})",
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    p.cipher_suites = chosen;
    Ok(p)
}

/// `ssl.enabled.protocols`, capped by `ssl.protocol` (TLSv1.2 there keeps TLSv1.3 off, as the
/// JDK's TLSv1.2 context does).
pub(super) fn protocol_versions(l: &Lookup<'_>) -> Result<Vec<&'static SupportedProtocolVersion>> {
    let (pkey, proto) = l.get("ssl.protocol");
    let cap13 = match proto.as_deref().unwrap_or("TLSv1.3") {
        "TLSv1.3" | "TLS" => true,
        "TLSv1.2" => false,
        other => {
            return Err(l.err(
                &pkey,
                format!("{other:?}: Sluice speaks TLSv1.2 and TLSv1.3 (TLS, TLSv1.2 or TLSv1.3)"),
            ));
        }
    };
    let (ekey, enabled) = l.get("ssl.enabled.protocols");
    let enabled = enabled.unwrap_or_else(|| "TLSv1.2,TLSv1.3".to_string());
    let mut out = Vec::new();
    for v in enabled.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match v {
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.3" if cap13 => out.push(&rustls::version::TLS13),
            "TLSv1.3" => {}
            other => {
                return Err(l.err(
                    &ekey,
                    format!("{other:?}: Sluice speaks TLSv1.2 and TLSv1.3 only"),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(l.err(
            &ekey,
            format!("no protocol left to speak (ssl.protocol is {proto:?})"),
        ));
    }
    Ok(out)
}

fn client_auth(l: &Lookup<'_>, protocol: &str) -> Result<ClientAuth> {
    let (key, v) = if protocol == "SASL_SSL" {
        l.prefixed_only("ssl.client.auth")
    } else {
        l.get("ssl.client.auth")
    };
    match v.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("none") => Ok(ClientAuth::None),
        Some("requested") => Ok(ClientAuth::Requested),
        Some("required") => Ok(ClientAuth::Required),
        Some(other) => Err(l.err(
            &key,
            format!("invalid value {other:?} (none, requested or required)"),
        )),
    }
}

/// Checks a store type: PEM is the only one Sluice reads.
fn pem_type(l: &Lookup<'_>, prop: &str) -> Result<()> {
    let (key, ty) = l.get(prop);
    match ty.as_deref() {
        Some(t) if t.eq_ignore_ascii_case("PEM") => Ok(()),
        t => Err(l.err(
            &key,
            format!(
                "{} is not PEM: Sluice reads PEM stores only (set {prop}=PEM)",
                t.unwrap_or("null")
            ),
        )),
    }
}

/// The certificate chain and private key (`ssl.keystore.*`).
pub(super) fn keystore(
    l: &Lookup<'_>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let (loc_key, location) = l.get("ssl.keystore.location");
    let (chain_key, chain) = l.get("ssl.keystore.certificate.chain");
    let (key_key, inline_key) = l.get("ssl.keystore.key");
    let (pw_key, password) = l.get("ssl.key.password");
    let (text, chain_text, chain_origin, key_origin) = match (&location, &chain, &inline_key) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(l.err(
                &loc_key,
                format!("set either {loc_key} or {chain_key} and {key_key}, not both"),
            ));
        }
        (Some(path), None, None) => {
            pem_type(l, "ssl.keystore.type")?;
            let text = std::fs::read(path)
                .map_err(|e| l.err(&loc_key, format!("cannot read {path}: {e}")))?;
            let what = format!("{loc_key} ({path})");
            (text.clone(), text, what.clone(), what)
        }
        (None, Some(c), Some(k)) => {
            pem_type(l, "ssl.keystore.type")?;
            (
                inline_pem(k),
                inline_pem(c),
                chain_key.clone(),
                key_key.clone(),
            )
        }
        (None, Some(_), None) => return Err(l.err(&chain_key, format!("{key_key} is not set"))),
        (None, None, Some(_)) => return Err(l.err(&key_key, format!("{chain_key} is not set"))),
        (None, None, None) => {
            return Err(l.err(
                &loc_key,
                format!(
                    "a TLS listener needs a certificate and key: set {loc_key} (a PEM file with \
                     both) or {chain_key} and {key_key}, with ssl.keystore.type=PEM"
                ),
            ));
        }
    };
    let certs = CertificateDer::pem_slice_iter(&chain_text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{chain_origin}: bad PEM certificate: {e}"))?;
    if certs.is_empty() {
        bail!("{chain_origin}: no certificate (-----BEGIN CERTIFICATE-----) found");
    }
    let key = private_key(&text, password.as_deref(), &pw_key)
        .map_err(|e| anyhow!("{key_origin}: {e}"))?;
    Ok((certs, key))
}

/// The private key of a PEM text: PKCS#8, encrypted PKCS#8 (with `password`), PKCS#1 or SEC1.
fn private_key(
    text: &[u8],
    password: Option<&str>,
    password_key: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let s = String::from_utf8_lossy(text);
    if let Some(start) = s.find(BEGIN) {
        let Some(password) = password else {
            return Err(format!(
                "the private key is encrypted: {password_key} is not set"
            ));
        };
        let end = s[start..]
            .find(END)
            .map(|e| start + e + END.len())
            .ok_or("the encrypted private key has no END line")?;
        let (_, der) = pkcs8::der::pem::decode_vec(s[start..end].as_bytes())
            .map_err(|e| format!("bad encrypted private key: {e}"))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| format!("bad encrypted private key: {e}"))?;
        let doc = info
            .decrypt(password)
            .map_err(|e| format!("cannot decrypt the private key with {password_key}: {e}"))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            doc.as_bytes().to_vec(),
        )));
    }
    match PrivateKeyDer::from_pem_slice(text) {
        Ok(k) => Ok(k),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => {
            Err("no private key (-----BEGIN PRIVATE KEY-----) found".to_string())
        }
        Err(e) => Err(format!("bad PEM private key: {e}")),
    }
}

/// The trust anchors for client certificates (`ssl.truststore.*`): the key that gave them,
/// and the store (None when neither key is set).
pub(super) fn truststore(l: &Lookup<'_>) -> Result<(String, Option<RootCertStore>)> {
    let (loc_key, location) = l.get("ssl.truststore.location");
    let (certs_key, inline) = l.get("ssl.truststore.certificates");
    let (key, origin, text) = match (location, inline) {
        (Some(_), Some(_)) => {
            return Err(l.err(&loc_key, format!("set either it or {certs_key}, not both")));
        }
        (Some(path), None) => {
            pem_type(l, "ssl.truststore.type")?;
            let text = std::fs::read(&path)
                .map_err(|e| l.err(&loc_key, format!("cannot read {path}: {e}")))?;
            (loc_key.clone(), format!("{loc_key} ({path})"), text)
        }
        (None, Some(c)) => {
            pem_type(l, "ssl.truststore.type")?;
            (certs_key.clone(), certs_key.clone(), inline_pem(&c))
        }
        (None, None) => return Ok((loc_key, None)),
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.map_err(|e| anyhow!("{origin}: bad PEM certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| anyhow!("{origin}: not a usable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        bail!("{origin}: no certificate (-----BEGIN CERTIFICATE-----) found");
    }
    Ok((key, Some(roots)))
}

/// PEM given as a property value: a properties file joins continued lines without their line
/// breaks, so the markers and the base64 lines may be separated by spaces only. Puts each
/// marker and each base64 run on a line of its own.
fn inline_pem(v: &str) -> Vec<u8> {
    static MARKER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"-----(BEGIN|END) [A-Z0-9 ]+-----").expect("a valid regex")
    });
    let mut out = String::with_capacity(v.len() + 64);
    let mut at = 0;
    let body = |s: &str, out: &mut String| {
        for word in s.split_whitespace() {
            out.push_str(word);
            out.push('\n');
        }
    };
    for m in MARKER.find_iter(v) {
        body(&v[at..m.start()], &mut out);
        out.push_str(m.as_str());
        out.push('\n');
        at = m.end();
    }
    body(&v[at..], &mut out);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::{inline_pem, private_key};

    /// A throwaway P-256 key, and the same key as openssl's `pkcs8 -topk8 -v2 aes-256-cbc`
    /// writes it with the password "test-pass" (PBES2: PBKDF2-HMAC-SHA256, AES-256-CBC).
    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgqZUQBYTNR4N/y58D
JmmEXSPaMtNCGJuXGFJR0Y4j7/2hRANCAATPvL07BQcp7XKH16PzYGqx58ukgTA1
7H+Uq9Br6dbM1oYDA7FwgOrGmgTTHSj32ljYW++ZaHPTU6o4B/g2X60W
-----END PRIVATE KEY-----
";
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgrGmroIO1fDwICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEBJU25gdf/nvOg7+jo3st0gEgZDR
uVtmyeB3HQHMkTL/WbPo/Cj3oK7+IJmtk05XfX/IgPQiWfnum80FGacZZOmn/Aq1
nt1wyxpGA/qsiI/m1ADRdko/KcGLw1U9A0/qJlW5rq2yyuF5z1by97aBaAdOL1jJ
1S9ZhdbX6qFgxDb8c58S3ztLg/gZqJEsw447dWVj5CqYlMPLhx7mxMe0erkqvJ8=
-----END ENCRYPTED PRIVATE KEY-----
";

    #[test]
    fn encrypted_pkcs8_keys_decrypt_with_the_key_password() {
        let plain = private_key(KEY.as_bytes(), None, "ssl.key.password").unwrap();
        let decrypted =
            private_key(ENCRYPTED.as_bytes(), Some("test-pass"), "ssl.key.password").unwrap();
        assert_eq!(plain.secret_der(), decrypted.secret_der());
        let e = private_key(ENCRYPTED.as_bytes(), None, "ssl.key.password").unwrap_err();
        assert!(e.contains("encrypted: ssl.key.password is not set"), "{e}");
        let e = private_key(ENCRYPTED.as_bytes(), Some("nope"), "x.ssl.key.password").unwrap_err();
        assert!(
            e.contains("cannot decrypt the private key with x.ssl.key.password"),
            "{e}"
        );
        let e = private_key(b"no key here", None, "ssl.key.password").unwrap_err();
        assert!(e.contains("no private key"), "{e}");
    }

    #[test]
    fn inline_pem_gets_its_line_breaks_back() {
        let v = "-----BEGIN CERTIFICATE----- QUJD REVG -----END CERTIFICATE-----";
        assert_eq!(
            String::from_utf8(inline_pem(v)).unwrap(),
            "-----BEGIN CERTIFICATE-----\nQUJD\nREVG\n-----END CERTIFICATE-----\n"
        );
    }
}
