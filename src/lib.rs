//! storage-framework: a Mesos framework that keeps every agent ready to serve persistent
//! volumes from a ScaleIO-class block-storage cluster. See ARCHITECTURE.md for the codemap.

pub mod backoff;
pub mod clock;
pub mod contract;
pub mod hash;
pub mod logging;
pub mod mesos;
pub mod resolver;
pub mod secret;
#[cfg(feature = "tls")]
pub mod sha256;
#[cfg(feature = "tls")]
pub mod tls;
pub mod version;

/// The scheduler's allocator (why dlmalloc: `heap.rs`), declared by the binaries that are the
/// scheduler or stand for it (`src/main.rs`, the benches that time its code in-process) with
/// [`scheduler_heap!`], not by the library: every binary that links the library would get it.
#[cfg(feature = "scheduler")]
pub mod heap;

/// musl's `memcmp` compares a byte at a time; the scheduler's takes words (see the module).
#[cfg(all(feature = "scheduler", any(test, target_env = "musl")))]
mod memcmp;

/// musl's `memcpy` and `memmove` are string instructions with a start-up cost that most copies
/// never amortise; the scheduler's copy in registers and SSE2 (see the module).
#[cfg(all(
    feature = "scheduler",
    target_arch = "x86_64",
    any(test, target_env = "musl")
))]
mod memcpy;

#[cfg(feature = "scheduler")]
pub mod cli;
#[cfg(feature = "scheduler")]
pub mod gateway;
#[cfg(feature = "scheduler")]
pub mod rest;
#[cfg(feature = "scheduler")]
pub mod scheduler;
#[cfg(feature = "scheduler")]
pub mod store;
