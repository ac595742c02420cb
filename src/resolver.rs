//! The resolver of the project's ureq agents (`plain_agent` here, `tls::agent`; only the
//! executor's package downloads keep ureq's defaults, for its proxy support).
//! Given a resolve timeout, ureq's own resolver looks a request's host up on a new thread
//! every time, an IP address included, and even when the request then reuses a pooled
//! connection. The scheduler's Mesos calls alone started 20,000 such threads at 10,000
//! agents (a 2 MiB stack mapped and unmapped each: most of the process's system calls).
//! An IP address needs no lookup; a name still goes to ureq's resolver, under its timeout.

use std::net::SocketAddr;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{Connector, NextTimeout, TcpConnector};

/// An agent with `config` for plain HTTP (https is refused: it has no TLS; nor does it go
/// through a proxy), that looks up names only. The pinned-TLS agent (`tls::agent`) uses the
/// same resolver.
pub fn plain_agent(config: Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        ().chain(TcpConnector::default()),
        LiteralFirst::<DefaultResolver>::default(),
    )
}

/// `R` looks names up: ureq's resolver, or a test's.
#[derive(Debug, Default)]
pub struct LiteralFirst<R = DefaultResolver> {
    names: R,
}

impl<R: Resolver> Resolver for LiteralFirst<R> {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        match literal(uri) {
            Some(addr) => {
                let mut one = self.empty();
                one.push(addr);
                Ok(one)
            }
            None => self.names.resolve(uri, config, timeout),
        }
    }
}

/// The address of a URL whose host is an IP address, with its scheme's port if it names none
/// (ureq's own `host:port`, which keeps an IPv6 address in brackets, as `SocketAddr` reads it).
fn literal(uri: &Uri) -> Option<SocketAddr> {
    let host_port = DefaultResolver::host_and_port(uri.scheme()?, uri.authority()?)?;
    host_port.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    #[test]
    fn ip_hosts_are_taken_as_they_are_and_names_are_not() {
        let at = |u: &str| literal(&u.parse::<Uri>().unwrap());
        assert_eq!(
            at("http://127.0.0.1:5050/api/v1/scheduler"),
            Some(([127, 0, 0, 1], 5050).into())
        );
        assert_eq!(
            at("https://10.1.2.3/api"),
            Some(([10, 1, 2, 3], 443).into())
        );
        assert_eq!(
            at("http://[::1]:8080/"),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(at("http://master.mesos:5050/"), None);
        assert_eq!(at("ftp://10.1.2.3/"), None);
    }

    /// Counts the lookups asked of it, which on ureq's resolver are threads started.
    #[derive(Debug, Default)]
    struct Lookups(std::sync::atomic::AtomicUsize);

    impl Resolver for Lookups {
        fn resolve(
            &self,
            _: &Uri,
            _: &Config,
            _: NextTimeout,
        ) -> Result<ResolvedSocketAddrs, ureq::Error> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut one = self.empty();
            one.push(([192, 0, 2, 1], 5050).into());
            Ok(one)
        }
    }

    #[test]
    fn only_names_are_looked_up() {
        let r = LiteralFirst {
            names: Lookups::default(),
        };
        let config = Config::default();
        let resolve = |u: &str| {
            let got = r.resolve(&u.parse().unwrap(), &config, NextTimeout::default());
            got.unwrap().iter().copied().collect::<Vec<SocketAddr>>()
        };
        assert_eq!(
            resolve("http://127.0.0.1:5050/api/v1/scheduler"),
            [([127, 0, 0, 1], 5050).into()]
        );
        assert_eq!(
            r.names.0.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "an IP address was looked up"
        );
        assert_eq!(
            resolve("http://leader.mesos:5050/"),
            [([192, 0, 2, 1], 5050).into()]
        );
        assert_eq!(r.names.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// The agents built with it reach an IP address.
    #[test]
    fn a_plain_agent_reaches_an_ip_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .unwrap();
        });
        let config = ureq::Agent::config_builder()
            .timeout_resolve(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(10)))
            .build();
        let agent = plain_agent(config);
        let body = agent
            .get(&format!("http://{addr}/"))
            .call()
            .map(|mut r| r.body_mut().read_to_string().unwrap_or_default());
        assert_eq!(body.map_err(|e| e.to_string()), Ok("ok".to_string()));
        server.join().unwrap();
    }
}
