//! Addresses as the keys of a poll's maps: an address written in its canonical form is kept as
//! an [`IpAddr`] (17 bytes, no allocation), any other spelling as its text.
//!
//! Why: a poll of 10,000 nodes keyed every SDS's and every connected SDC's address by its own
//! small string, 20,000 allocations a poll held at the scheduler's peak. Why not parse every
//! spelling: the gateway and the node's offer are matched as strings, so `::1` and
//! `0:0:0:0:0:0:0:1` are different addresses to them, and must stay so here.

use std::io::Write;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Addr {
    Ip(IpAddr),
    Text(Box<str>),
}

impl Addr {
    pub fn of(text: &str) -> Addr {
        match canonical(text) {
            Some(ip) => Addr::Ip(ip),
            None => Addr::Text(text.into()),
        }
    }

    /// The address, when written canonically.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Addr::Ip(ip) => Some(*ip),
            Addr::Text(_) => None,
        }
    }
}

/// The address written as `text`, when that is its canonical form (an IPv6 address in
/// capitals, or an IPv4 one written as IPv6, is not).
pub(super) fn canonical(text: &str) -> Option<IpAddr> {
    let parsed: IpAddr = text.parse().ok()?;
    // Written out on the stack: this runs for every address of every poll. The longest
    // form (an IPv4-mapped IPv6 address) is 45 bytes.
    let mut buf = [0u8; 48];
    let mut out = &mut buf[..];
    write!(out, "{parsed}").ok()?;
    let len = 48 - out.len();
    (&buf[..len] == text.as_bytes()).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_canonical_spelling_is_kept_as_an_address() {
        for ip in ["10.0.0.1", "::1", "fe80::1", "::ffff:255.255.255.255"] {
            assert_eq!(Addr::of(ip), Addr::Ip(ip.parse().unwrap()), "{ip}");
        }
        let longest = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255";
        assert_eq!(canonical(longest), None, "written as IPv6 by Rust");
        for other in ["0:0:0:0:0:0:0:1", "FE80::1", "host.example", "", longest] {
            assert_eq!(Addr::of(other), Addr::Text(other.into()), "{other}");
            assert_ne!(Addr::of(other).ip(), Some("::1".parse().unwrap()));
        }
    }
}
