//! The client side of TLS, for this broker's connections to the other brokers when the
//! inter-broker listener runs over TLS (SSL or SASL_SSL). As Kafka's broker does, it uses
//! that listener's own `ssl.*` settings (`listener.name.<l>.ssl.*` winning over `ssl.*`): the
//! truststore verifies the other brokers' certificates, the keystore is this broker's client
//! certificate (so `ssl.client.auth=required` between brokers works), and
//! `ssl.endpoint.identification.algorithm` (`https` by default; empty turns it off) checks
//! that a certificate names the address connected to.

use std::sync::Arc;

use anyhow::Result;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, SignatureScheme};

use super::settings::{self, Lookup};
use crate::config::BrokerConfig;

/// The TLS client configuration for connecting through listener `listener`.
pub fn load(config: &BrokerConfig, listener: &str) -> Result<Arc<ClientConfig>> {
    let l = Lookup {
        config,
        prefix: format!("listener.name.{}.", listener.to_ascii_lowercase()),
    };
    let provider = Arc::new(settings::provider(&l)?);
    let versions = settings::protocol_versions(&l)?;
    let (trust_key, roots) = settings::truststore(&l)?;
    let Some(roots) = roots else {
        return Err(l.err(
            &trust_key,
            format!(
                "the inter-broker listener {listener} runs over TLS: the brokers verify each \
                 other with its truststore (set {trust_key} or ssl.truststore.certificates)"
            ),
        ));
    };
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| l.err(&trust_key, e))?;
    let (alg_key, alg) = l.get("ssl.endpoint.identification.algorithm");
    let verifier: Arc<dyn ServerCertVerifier> = match alg.as_deref() {
        None => Arc::new(AnyName(webpki)),
        Some(a) if a.eq_ignore_ascii_case("https") => webpki,
        Some(other) => {
            return Err(l.err(
                &alg_key,
                format!("{other:?}: Sluice checks host names with https, or not at all (empty)"),
            ));
        }
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| l.err(&l.get("ssl.enabled.protocols").0, e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let (chain, key) = settings::keystore(&l)?;
    let chain_key = l.get("ssl.keystore.location").0;
    let client = builder.with_client_auth_cert(chain, key).map_err(|e| {
        l.err(
            &chain_key,
            format!("the key does not suit the certificate: {e}"),
        )
    })?;
    Ok(Arc::new(client))
}

/// The server name to verify a broker at `host` against: an IP address or a DNS name.
pub fn server_name(host: &str) -> Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| anyhow::anyhow!("{host:?} is not a host name TLS can verify: {e}"))
}

/// A verifier that checks the chain and signatures but not which name the certificate is
/// for: `ssl.endpoint.identification.algorithm` set empty.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
