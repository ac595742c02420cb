//! TCP connections from a chosen local address, for ureq: an emulated executor's calls leave
//! from a loopback address of its own (`synthetic.rs`: `executor_source`), as a real
//! executor's leave from its host, so that the scheduler's per-address limits see 10,000
//! sources, not one.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
};

#[derive(Debug, Clone, Copy)]
pub(super) struct BoundTcp {
    pub local: Ipv4Addr,
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A blocking connection to `to` from `local` (any port).
fn connect_from(local: Ipv4Addr, to: SocketAddrV4) -> std::io::Result<TcpStream> {
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; it is closed on error
    // and otherwise handed to a TcpStream, which owns it from then on.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let from = sockaddr(SocketAddrV4::new(local, 0));
        let dest = sockaddr(to);
        let bound = libc::bind(fd, std::ptr::addr_of!(from).cast(), len);
        if bound != 0 || libc::connect(fd, std::ptr::addr_of!(dest).cast(), len) != 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpStream::from_raw_fd(fd))
    }
}

/// A plain TCP transport (ureq's own is not public).
#[derive(Debug)]
pub(super) struct BoundTransport {
    buffers: LazyBuffers,
    stream: TcpStream,
}

/// A socket timeout for ureq's next one (a zero socket timeout would mean none).
fn socket_timeout(t: NextTimeout) -> Option<Duration> {
    if t.after.is_not_happening() {
        return None;
    }
    Some((*t.after).max(Duration::from_millis(1)))
}

impl Transport for BoundTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.set_write_timeout(socket_timeout(timeout))?;
        self.stream.write_all(&self.buffers.output()[..amount])?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.set_read_timeout(socket_timeout(timeout))?;
        let amount = self.stream.read(self.buffers.input_append_buf())?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    /// Open while the peer has neither closed it nor sent what no request asked for.
    fn is_open(&mut self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let open = matches!(self.stream.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        self.stream.set_nonblocking(false).is_ok() && open
    }
}

impl<In: Transport> Connector<In> for BoundTcp {
    type Out = Either<In, BoundTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(c) = chained {
            return Ok(Some(Either::A(c)));
        }
        let to = details
            .addrs
            .iter()
            .find_map(|a| match a {
                SocketAddr::V4(v4) => Some(*v4),
                SocketAddr::V6(_) => None,
            })
            .ok_or_else(|| ureq::Error::Io(std::io::Error::other("no IPv4 address to reach")))?;
        let stream = connect_from(self.local, to)?;
        let _ = stream.set_nodelay(true);
        let config = &details.config;
        let buffers = LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size());
        Ok(Some(Either::B(BoundTransport { buffers, stream })))
    }
}
