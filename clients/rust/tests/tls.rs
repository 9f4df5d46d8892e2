//! TLS and mutual TLS against the real server: verification, the identity
//! the ACL judges, and session resumption across a client's connections.
#![cfg(all(feature = "tls", any(feature = "tokio", feature = "blocking")))]

mod support;

use std::time::Duration;

use monolock::rustls::{
    self,
    pki_types::{CertificateDer, PrivateKeyDer},
};
use monolock::Error;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use support::*;

const LEASE: Duration = Duration::from_secs(2);

/// A lab PKI: a CA, a server certificate for 127.0.0.1, and a client
/// certificate whose identity is its URI SAN.
struct Pki {
    ca: rcgen::Certificate,
    client: rcgen::Certificate,
    client_key: KeyPair,
    _dir: TempDir, // removed with the Pki
    args: Vec<String>,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "monolock test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&server_key, &ca, &ca_key)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![SanType::URI("spiffe://lab/worker/7".try_into().unwrap())];
        params.distinguished_name.push(DnType::CommonName, "w7");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = params.signed_by(&client_key, &ca, &ca_key).unwrap();
        let dir = TempDir::new("tls");
        let args = vec![
            "-tls-cert".into(),
            dir.write("server.pem", &server.pem()),
            "-tls-key".into(),
            dir.write("server-key.pem", &server_key.serialize_pem()),
            "-tls-client-ca".into(),
            dir.write("ca.pem", &ca.pem()),
            "-acl-file".into(),
            dir.write(
                "acl.json",
                r#"{"rules": [{"identity": "spiffe://lab/worker/*", "locks": ["nightly/*"]}]}"#,
            ),
        ];
        Pki {
            ca,
            client,
            client_key,
            _dir: dir,
            args,
        }
    }

    fn server(&self, bin: &str) -> Server {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Server::start(bin, &args)
    }

    fn config(&self, ca: &rcgen::Certificate) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_client_auth_cert(
                vec![CertificateDer::from(self.client.der().to_vec())],
                PrivateKeyDer::try_from(self.client_key.serialize_der()).unwrap(),
            )
            .unwrap()
    }

    /// A CA the server's certificate does not chain to.
    fn other_ca() -> rcgen::Certificate {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap()
    }
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn async_mutual_tls_identity_and_resumption() {
    let Some(bin) = server_binary() else { return };
    let pki = Pki::new();
    let server = pki.server(&bin);
    let client = monolock::Client::new(&server.addr).with_tls(pki.config(&pki.ca));
    let first = client.lock("nightly/a", LEASE).await.unwrap();
    assert_eq!(
        first.tls_resumed(),
        Some(false),
        "a client's first connection"
    );
    let server_port = port_of(&server.addr);
    let port = tokio::task::spawn_blocking(move || client_port_towards(server_port))
        .await
        .unwrap()
        .expect("the connection");
    first.release().await.unwrap();
    let time_wait = tokio::task::spawn_blocking(move || time_wait_on(port, server_port));
    assert!(
        !time_wait.await.unwrap(),
        "RELEASE inside TLS: the server closes first"
    );
    for name in ["nightly/b", "nightly/c"] {
        let lock = client.lock(name, LEASE).await.unwrap();
        assert_eq!(
            lock.tls_resumed(),
            Some(true),
            "{name}: the session of an earlier connection"
        );
        lock.release().await.unwrap();
    }
    // The identity is the URI SAN, which the ACL allows nightly/* only.
    let denied = client.lock("other", LEASE).await;
    assert!(
        matches!(&denied, Err(Error::Server { code: 0x18, .. })),
        "{denied:?}"
    );
    assert!(!denied.unwrap_err().is_retriable());
    let stranger = monolock::Client::new(&server.addr).with_tls(pki.config(&Pki::other_ca()));
    let got = stranger.lock("nightly/a", LEASE).await;
    assert!(matches!(got, Err(Error::Tls(_))), "{got:?}");
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_mutual_tls_identity_and_resumption() {
    let Some(bin) = server_binary() else { return };
    let pki = Pki::new();
    let server = pki.server(&bin);
    let client = monolock::blocking::Client::new(&server.addr).with_tls(pki.config(&pki.ca));
    let first = client.lock("nightly/a", LEASE).unwrap();
    assert_eq!(first.tls_resumed(), Some(false));
    let port = client_port_towards(port_of(&server.addr)).expect("the connection");
    first.release().unwrap();
    assert!(
        !time_wait_on(port, port_of(&server.addr)),
        "RELEASE inside TLS: the server closes first"
    );
    let again = client.lock("nightly/b", LEASE).unwrap();
    assert_eq!(again.tls_resumed(), Some(true));
    // A heartbeat round trip over TLS, then the release.
    assert!(!again.wait_lost(Duration::from_millis(600)));
    again.release().unwrap();
    assert!(matches!(
        client.lock("other", LEASE),
        Err(Error::Server { code: 0x18, .. })
    ));
    let stranger =
        monolock::blocking::Client::new(&server.addr).with_tls(pki.config(&Pki::other_ca()));
    assert!(matches!(
        stranger.lock("nightly/a", LEASE),
        Err(Error::Tls(_))
    ));
}
