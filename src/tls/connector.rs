//! A ureq agent whose https connections use a given rustls configuration. ureq's own TLS
//! takes root certificates or no verification; a pinned or first-use verifier needs this.

use std::io::{Read, Write};
use std::sync::Arc;

use crate::resolver::LiteralFirst;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, TcpConnector,
    Transport, TransportAdapter,
};

/// An agent with `config` whose https requests are verified by `tls` alone.
pub fn agent(config: ureq::config::Config, tls: Arc<ClientConfig>) -> ureq::Agent {
    agent_over(config, tls, TcpConnector::default())
}

/// [`agent`] over connections that `tcp` opens (the dev cluster's emulated executors bind
/// each to its own agent's address, as executors on separate hosts are).
pub fn agent_over<C>(config: ureq::config::Config, tls: Arc<ClientConfig>, tcp: C) -> ureq::Agent
where
    C: Connector<()>,
{
    let connector = ().chain(tcp).chain(Tls { config: tls });
    ureq::Agent::with_parts(
        config,
        connector,
        LiteralFirst::<DefaultResolver>::default(),
    )
}

struct Tls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

/// A refused certificate reaches the caller as an I/O error with rustls' message, which
/// names both fingerprints; ureq's own TLS error variant only takes a static text.
fn io_error(e: impl std::fmt::Display) -> ureq::Error {
    ureq::Error::Io(std::io::Error::other(format!("TLS: {e}")))
}

impl<In: Transport> Connector<In> for Tls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .ok_or_else(|| io_error("the URL names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(io_error)?;
        let mut conn = ClientConnection::new(self.config.clone(), name).map_err(io_error)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock).map_err(io_error)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

pub struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsTransport")
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
