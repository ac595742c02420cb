//! Random identifiers without a random-number crate: std's `RandomState` is keyed from the
//! OS random source, so hashing a counter with fresh keys gives unpredictable 64-bit values.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A version-4 UUID, as the agent generates for every status update.
pub fn uuid_v4() -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&random_u64().to_be_bytes());
    b[8..].copy_from_slice(&random_u64().to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

pub fn uuid_string(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if hex.len() != 32 {
        return hex;
    }
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

pub fn new_uuid_string() -> String {
    uuid_string(&uuid_v4())
}

/// The check stout's `UUID::fromBytes` makes: 16 bytes with a known version nibble.
pub fn valid_uuid(bytes: &[u8]) -> bool {
    bytes.len() == 16 && (1..=5).contains(&(bytes[6] >> 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_valid_and_distinct() {
        let a = uuid_v4();
        let b = uuid_v4();
        assert_ne!(a, b);
        assert!(valid_uuid(&a));
        assert_eq!(uuid_string(&a).len(), 36);
        assert!(!valid_uuid(&[0u8; 16]));
        assert!(!valid_uuid(&a[..15]));
        // Both halves are random: no fixed tail across ids.
        let tails: std::collections::HashSet<[u8; 2]> = (0..8)
            .map(|_| {
                let u = uuid_v4();
                [u[14], u[15]]
            })
            .collect();
        assert!(tails.len() > 1);
    }
}
