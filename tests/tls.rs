//! The crate's TLS pieces against real peers: the self-signed certificate as OpenSSL (curl)
//! reads and verifies it, and the pinned ureq agent against a rustls server.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use storage_framework::tls::{self, selfsigned, Fingerprint, PinnedVerifier};

/// A one-request-per-connection https server answering `ok`; returns its port.
fn serve(cert: &selfsigned::SelfSigned, connections: usize) -> u16 {
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pkcs8().to_vec().into());
    let config = rustls::ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert_der.clone().into()], key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().take(connections) {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut stream = rustls::StreamOwned::new(conn, tcp.unwrap());
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            if head.ends_with(b"\r\n\r\n") {
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
                let _ = stream.flush();
            }
        }
    });
    port
}

fn pinned_agent(pins: Vec<Fingerprint>) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build();
    tls::agent(
        config,
        tls::client_config(Arc::new(PinnedVerifier::new(pins))),
    )
}

#[test]
fn the_pinned_agent_talks_to_the_pinned_certificate_only() {
    let cert = selfsigned::make(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let other = selfsigned::make(&["localhost".into()]).unwrap();
    let port = serve(&cert, 2);
    let url = format!("https://127.0.0.1:{port}/x");

    let mut ok = pinned_agent(vec![Fingerprint::of(&cert.cert_der)])
        .get(&url)
        .call()
        .expect("the pinned certificate is accepted");
    assert_eq!(ok.body_mut().read_to_string().unwrap(), "ok");

    let wrong = Fingerprint::of(&other.cert_der);
    let err = pinned_agent(vec![wrong])
        .get(&url)
        .call()
        .unwrap_err()
        .to_string();
    let seen = Fingerprint::of(&cert.cert_der).to_string();
    assert!(
        err.contains(&seen) && err.contains(&wrong.to_string()),
        "the refusal names the seen and the pinned fingerprint: {err}"
    );
    // Clients tell it from a peer that is away by its text, as ureq gives it.
    assert!(storage_framework::tls::refused_certificate(&err), "{err}");
    assert!(!storage_framework::tls::refused_certificate(
        "io: Connection refused (os error 111)"
    ));
}

#[test]
fn openssl_reads_and_verifies_the_self_signed_certificate() {
    let cert = selfsigned::make(&["storage.example".into(), "127.0.0.1".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("tls-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let der = dir.join("cert.der");
    let pem = dir.join("cert.pem");
    std::fs::write(&der, &cert.cert_der).unwrap();
    let text = Command::new("openssl")
        .args(["x509", "-inform", "DER", "-noout", "-text", "-in"])
        .arg(&der)
        .output()
        .expect("openssl runs");
    let text = String::from_utf8_lossy(&text.stdout);
    for want in [
        "CN = storage.example",
        "DNS:storage.example",
        "IP Address:127.0.0.1",
        "ecdsa-with-SHA256",
        "prime256v1",
        "9999 GMT",
    ] {
        assert!(
            text.contains(want),
            "openssl's reading lacks {want:?}:\n{text}"
        );
    }
    let to_pem = Command::new("openssl")
        .args(["x509", "-inform", "DER", "-in"])
        .arg(&der)
        .arg("-out")
        .arg(&pem)
        .status()
        .unwrap();
    assert!(to_pem.success());

    // curl verifies the signature, the dates and the IP address against the certificate.
    let port = serve(&cert, 1);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(&pem)
        .arg(format!("https://127.0.0.1:{port}/x"))
        .output()
        .expect("curl runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok",
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
