//! `memcpy` and `memmove` for the static musl scheduler, sixteen bytes at a time.
//!
//! musl's x86_64 `memcpy` is `rep movsq`, after a `movsb` per byte up to an 8-byte aligned
//! destination and another per byte after it; its `memmove` backwards is `std; rep movsb`,
//! a byte at a time. String instructions pay a start-up cost of dozens of cycles, which
//! nearly every copy in the scheduler is too small to amortise: Rust moves every value over
//! a few words with `memcpy` (a decoded offer is 400 bytes, a resource 176, a `Str` 24), and
//! a B-tree insert shifts its node's keys with `memmove`. In `perf` of the musl wire bench,
//! `memcpy` was 42% of the decode (callgrind, which counts instructions, had put it at 9%:
//! `rep movsq` is one instruction).
//!
//! So copies of up to 64 bytes are done with loads of the whole source into registers, then
//! stores (two overlapping ones cover any length between powers of two); longer ones 32 bytes
//! a turn with SSE2, which every x86_64 has. A long copy that does not overlap takes
//! `rep movsb`, which CPUs since 2012 (ERMS) run at cache-line speed once it is past its
//! start-up cost. Defined here, the linker takes these instead of libc's, as for `memcmp`
//! (`memcmp.rs`): musl's `memmove` jumps into its `memcpy`'s object, so both are replaced.
//!
//! The loops are inline assembly: a loop of loads and stores written in Rust is what LLVM
//! recognises as a copy and turns back into a call to `memcpy`, which would be this function.
//! In the library's unit tests the symbols keep their Rust names: they are tested there
//! without replacing glibc's.

use core::arch::asm;
use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};

/// From this length a copy that does not overlap is left to `rep movsb` (glibc's threshold
/// for 16-byte vectors): below it the start-up cost is more than the loop's turns.
const REP_MOVSB_FROM: usize = 2048;

/// Copies `n` bytes from `src` to `dst`, which do not overlap. Returns `dst`.
///
/// # Safety
/// `src` is valid for reads and `dst` for writes of `n` bytes, as C's `memcpy` requires.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    unsafe { copy(dst, src, n) };
    dst
}

/// Copies `n` bytes from `src` to `dst`, which may overlap. Returns `dst`.
///
/// # Safety
/// As [`memcpy`], without the rule against overlap.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    unsafe { copy(dst, src, n) };
    dst
}

/// One copy for both: a short one reads all of its source before it writes, so overlap does
/// not matter to it, and a long one picks its direction.
#[inline(always)]
unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) {
    unsafe {
        if n <= 16 {
            short(dst, src, n);
        } else if n <= 32 {
            let a = load(src, 0);
            let b = load(src, n - 16);
            store(dst, 0, a);
            store(dst, n - 16, b);
        } else if n <= 64 {
            let a = load(src, 0);
            let b = load(src, 16);
            let c = load(src, n - 32);
            let d = load(src, n - 16);
            store(dst, 0, a);
            store(dst, 16, b);
            store(dst, n - 32, c);
            store(dst, n - 16, d);
        } else if (dst as usize).wrapping_sub(src as usize) >= n {
            // The destination starts before the source or after its end: a forward copy
            // reads each byte before it is overwritten.
            if n >= REP_MOVSB_FROM && (src as usize).wrapping_sub(dst as usize) >= n {
                rep_movsb(dst, src, n);
            } else {
                forward(dst, src, n);
            }
        } else {
            backward(dst, src, n);
        }
    }
}

/// `n` <= 16: two overlapping loads of the largest width that fits, then two stores.
#[inline(always)]
unsafe fn short(dst: *mut u8, src: *const u8, n: usize) {
    unsafe {
        if n >= 8 {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else if n >= 2 {
            let a = src.cast::<u16>().read_unaligned();
            let b = src.add(n - 2).cast::<u16>().read_unaligned();
            dst.cast::<u16>().write_unaligned(a);
            dst.add(n - 2).cast::<u16>().write_unaligned(b);
        } else if n == 1 {
            *dst = *src;
        }
    }
}

#[inline(always)]
unsafe fn load(p: *const u8, at: usize) -> __m128i {
    unsafe { _mm_loadu_si128(p.add(at).cast()) }
}

#[inline(always)]
unsafe fn store(p: *mut u8, at: usize, v: __m128i) {
    unsafe { _mm_storeu_si128(p.add(at).cast(), v) }
}

/// `n` > 64, the destination not inside the source past its start. The last 32 bytes are
/// read first and written last, so the loop may stop at any 32-byte step short of the end.
#[inline(never)]
unsafe fn forward(dst: *mut u8, src: *const u8, n: usize) {
    unsafe {
        let c = load(src, n - 32);
        let d = load(src, n - 16);
        asm!(
            "xor {i:e}, {i:e}",
            "2:",
            "movdqu {a}, xmmword ptr [{s} + {i}]",
            "movdqu {b}, xmmword ptr [{s} + {i} + 16]",
            "movdqu xmmword ptr [{d} + {i}], {a}",
            "movdqu xmmword ptr [{d} + {i} + 16], {b}",
            "add {i}, 32",
            "cmp {i}, {end}",
            "jb 2b",
            s = in(reg) src,
            d = in(reg) dst,
            end = in(reg) n - 32,
            i = out(reg) _,
            a = out(xmm_reg) _,
            b = out(xmm_reg) _,
            options(nostack),
        );
        store(dst, n - 32, c);
        store(dst, n - 16, d);
    }
}

/// `n` > 64, the destination inside the source past its start: from the end down. The first
/// 32 bytes are read first and written last.
#[inline(never)]
unsafe fn backward(dst: *mut u8, src: *const u8, n: usize) {
    unsafe {
        let a = load(src, 0);
        let b = load(src, 16);
        asm!(
            "2:",
            "sub {i}, 32",
            "movdqu {x}, xmmword ptr [{s} + {i}]",
            "movdqu {y}, xmmword ptr [{s} + {i} + 16]",
            "movdqu xmmword ptr [{d} + {i}], {x}",
            "movdqu xmmword ptr [{d} + {i} + 16], {y}",
            "cmp {i}, 32",
            "ja 2b",
            s = in(reg) src,
            d = in(reg) dst,
            i = inout(reg) n => _,
            x = out(xmm_reg) _,
            y = out(xmm_reg) _,
            options(nostack),
        );
        store(dst, 0, a);
        store(dst, 16, b);
    }
}

/// A long copy that does not overlap. The direction flag is clear, as the ABI guarantees at
/// every call.
#[inline(never)]
unsafe fn rep_movsb(dst: *mut u8, src: *const u8, n: usize) {
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(37).wrapping_add(seed) % 251) as u8)
            .collect()
    }

    /// Every length up to past the loop's first turns, and each side of `rep movsb`'s
    /// threshold, at every alignment of either side: the copied bytes are the source's, and
    /// not one byte around them is touched.
    #[test]
    fn copies_every_length_at_every_alignment_and_nothing_beside() {
        let lengths = (0..=200).chain([
            REP_MOVSB_FROM - 1,
            REP_MOVSB_FROM,
            REP_MOVSB_FROM + 33,
            70_001,
        ]);
        for n in lengths {
            let src = pattern(n + 16, 7);
            for s_off in 0..8 {
                for d_off in [0, 1, 3, 8, 13] {
                    let mut dst = vec![0xa5u8; n + 32];
                    let back =
                        unsafe { memcpy(dst.as_mut_ptr().add(d_off), src.as_ptr().add(s_off), n) };
                    assert_eq!(back, unsafe { dst.as_mut_ptr().add(d_off) });
                    assert_eq!(&dst[d_off..d_off + n], &src[s_off..s_off + n], "n {n}");
                    assert!(dst[..d_off].iter().all(|b| *b == 0xa5), "before, n {n}");
                    assert!(dst[d_off + n..].iter().all(|b| *b == 0xa5), "after, n {n}");
                }
            }
        }
    }

    /// Overlapping moves either way, by near and far distances, at every length class: the
    /// result is what `copy_within` (the test's libc `memmove`) makes.
    #[test]
    fn moves_overlapping_ranges_either_way_as_copy_within_does() {
        for n in (0..=140).chain([255, 1000, REP_MOVSB_FROM + 5, 9000]) {
            for shift in [1usize, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200] {
                for forward_shift in [true, false] {
                    let mut ours = pattern(n + shift + 8, 3);
                    let mut want = ours.clone();
                    let (from, to) = if forward_shift {
                        (4, 4 + shift)
                    } else {
                        (4 + shift, 4)
                    };
                    want.copy_within(from..from + n, to);
                    let p = ours.as_mut_ptr();
                    unsafe { memmove(p.add(to), p.add(from), n) };
                    assert_eq!(
                        ours, want,
                        "n {n}, shift {shift}, to the right {forward_shift}"
                    );
                }
            }
        }
    }
}
