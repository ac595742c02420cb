//! `memcmp` and `bcmp` for the static musl scheduler, eight bytes at a time.
//!
//! musl's `memcmp` compares one byte per loop turn, and every string comparison in Rust
//! (`==` on `str`, `Ord` for the model's B-tree keys) ends in it. The scheduler's keys are
//! Mesos agent ids, which share a 36-character prefix, and its per-batch passes compare a
//! 64-character executor digest per node: at 10,000 agents `memcmp` was 18% of the
//! scheduler's CPU (`perf`, `tests/bench/memory.rs`). Defined here, the linker takes these
//! instead of libc's: an archive member is only pulled in for a symbol still undefined.
//!
//! The loops use unaligned word loads, nothing LLVM turns back into a `memcmp` call (in the
//! release build's disassembly neither function calls anything). In the library's unit tests
//! the symbols keep their Rust names: they are tested there without replacing glibc's.

/// Compares `n` bytes at `a` and `b` as unsigned bytes, in memory order: negative, zero or
/// positive as `a` sorts before, equal to or after `b`.
///
/// # Safety
/// `a` and `b` are valid for reads of `n` bytes, as C's `memcmp` requires.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i + 8 <= n {
        let (x, y) = unsafe { (word(a, i), word(b, i)) };
        if x != y {
            return order(x, y);
        }
        i += 8;
    }
    if i < n && n >= 8 {
        // The last word, overlapping bytes already found equal.
        let (x, y) = unsafe { (word(a, n - 8), word(b, n - 8)) };
        return if x == y { 0 } else { order(x, y) };
    }
    while i < n {
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// Zero when the `n` bytes at `a` and `b` are equal, else non-zero (LLVM calls it for `==`).
///
/// # Safety
/// As [`memcmp`].
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    unsafe { memcmp(a, b, n) }
}

#[inline(always)]
unsafe fn word(p: *const u8, at: usize) -> u64 {
    unsafe { p.add(at).cast::<u64>().read_unaligned() }
}

/// The order of two unequal words by their first differing byte in memory: read big-endian,
/// the first byte is the most significant.
#[inline(always)]
fn order(x: u64, y: u64) -> i32 {
    if u64::from_be(x) < u64::from_be(y) {
        -1
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(v: i32) -> i32 {
        v.signum()
    }

    fn byte_loop(a: &[u8], b: &[u8]) -> i32 {
        a.iter()
            .zip(b)
            .find(|(x, y)| x != y)
            .map_or(0, |(x, y)| i32::from(*x) - i32::from(*y))
    }

    #[test]
    fn orders_as_a_byte_loop_at_every_length_offset_and_difference() {
        let base: Vec<u8> = (0..96u32).map(|i| (i * 37 % 251) as u8).collect();
        for offset in 0..8 {
            for n in 0..80 {
                let a = &base[offset..offset + n];
                assert_eq!(unsafe { memcmp(a.as_ptr(), a.as_ptr(), n) }, 0);
                for at in 0..n {
                    // Differences that only an unsigned, first-byte-first compare orders right:
                    // the high bit, and a later byte that would outweigh the first in a
                    // little-endian word.
                    for (d, later) in [(1u8, 0u8), (0x80, 0), (0x7f, 0xff)] {
                        let mut b = a.to_vec();
                        b[at] = b[at].wrapping_add(d);
                        if at + 1 < n {
                            b[at + 1] = b[at + 1].wrapping_sub(later);
                        }
                        let want = sign(byte_loop(a, &b));
                        assert_eq!(sign(unsafe { memcmp(a.as_ptr(), b.as_ptr(), n) }), want);
                        assert_eq!(sign(unsafe { memcmp(b.as_ptr(), a.as_ptr(), n) }), -want);
                        assert_eq!(unsafe { bcmp(a.as_ptr(), b.as_ptr(), n) } != 0, want != 0);
                    }
                }
            }
        }
    }
}
