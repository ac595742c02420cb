//! The `uuid` of a status update: 16 random bytes in the layout of a version 4 UUID, which
//! is what the agent checks before it takes an UPDATE.

use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub type Uuid = [u8; 16];

/// A fresh version 4 UUID from `/dev/urandom`.
pub fn random() -> Uuid {
    let mut bytes = [0u8; 16];
    let read = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if let Err(e) = read {
        // Uniqueness is what matters to the agent, not unpredictability: a clock, the pid
        // and a counter still never repeat within this executor.
        log::warn!("/dev/urandom unreadable ({e}); deriving the update uuid from the clock");
        bytes = fallback();
    }
    v4(bytes)
}

fn fallback() -> Uuid {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&nanos.to_le_bytes());
    bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    bytes[12..].copy_from_slice(&(count as u32).to_le_bytes());
    bytes
}

/// Stamps the version (4) and the RFC 4122 variant onto 16 random bytes.
pub fn v4(mut bytes: Uuid) -> Uuid {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

/// The usual `8-4-4-4-12` hex text, for logs.
pub fn to_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_and_variant_bits() {
        for input in [[0u8; 16], [0xff; 16]] {
            let u = v4(input);
            assert_eq!(u[6] >> 4, 4);
            assert_eq!(u[8] >> 6, 0b10);
        }
        let u = v4([0xab; 16]);
        assert_eq!(u[6] & 0x0f, 0x0b, "low nibble kept");
        assert_eq!(u[8] & 0x3f, 0x2b, "low six bits kept");
    }

    #[test]
    fn random_uuids_are_v4_and_distinct() {
        let a = random();
        let b = random();
        assert_ne!(a, b);
        assert_eq!(a[6] >> 4, 4);
        assert_eq!(b[8] >> 6, 0b10);
    }

    #[test]
    fn fallback_never_repeats() {
        let a = v4(fallback());
        let b = v4(fallback());
        assert_ne!(a, b);
    }

    #[test]
    fn text_form() {
        let bytes = [
            0x3a, 0x1c, 0x2a, 0x3e, 0x2b, 0x43, 0x4f, 0x2c, 0x9a, 0x6f, 0x0f, 0x1d, 0x1f, 0x4a,
            0x7b, 0x10,
        ];
        assert_eq!(to_text(&bytes), "3a1c2a3e-2b43-4f2c-9a6f-0f1d1f4a7b10");
    }
}
