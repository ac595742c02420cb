//! One content hash for the crate.

/// FNV-1a, 64 bits: a content fingerprint (plan versions, ETags), not a security measure.
pub fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = ContentHasher::default();
    h.update(bytes);
    h.finish()
}

/// [`content_hash`] of bytes that come in pieces (a journal line written as it is made).
#[derive(Clone, Copy)]
pub struct ContentHasher(u64);

impl Default for ContentHasher {
    fn default() -> Self {
        ContentHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl ContentHasher {
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

/// A hasher for in-memory maps keyed by ids (agent ids) that are looked up per node on a hot
/// path: the save walks every node of the model on every batch, and std's SipHash of 10,000
/// agent ids per save was a fifth of the scheduler's CPU in a 10,000-agent launch wave. Eight
/// bytes per step (the Fx scheme of rustc's own tables); no defence against chosen keys, which
/// the master's ids are not.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `HashMap`/`HashSet` state for [`KeyHasher`].
pub type KeyHash = std::hash::BuildHasherDefault<KeyHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Ids that differ in one byte anywhere, or only in length, hash apart.
    #[test]
    fn ids_differing_anywhere_hash_apart() {
        let base = "5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e-S1234";
        let h = |s: &str| KeyHash::default().hash_one(s);
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(h(base)));
        for i in 0..base.len() {
            let mut b = base.as_bytes().to_vec();
            b[i] ^= 1;
            assert!(seen.insert(h(std::str::from_utf8(&b).unwrap())), "byte {i}");
        }
        for n in 0..base.len() {
            assert!(seen.insert(h(&base[..n])), "prefix {n}");
        }
        let mut set: std::collections::HashSet<&str, KeyHash> = Default::default();
        set.insert(base);
        assert!(set.contains(base) && !set.contains(&base[1..]));
    }
}
