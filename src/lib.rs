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

/// The scheduler's allocator, in every binary that links the scheduler (its own, the
/// benches, the tests); the executor keeps musl's. musl's allocator takes a lock and walks
/// its slot metadata on every call, which made decoding a one-offer OFFERS event eight times
/// slower on the static build than on glibc. dlmalloc is one heap behind one lock: as fast as
/// glibc's on this load, and unlike per-thread-cache allocators (mimalloc: 75 MB at 10,000
/// agents) it keeps no memory per thread, of which the scheduler has 78. Not in the library's
/// own unit tests: they link the library again (through the dev cluster), allocator and all.
#[cfg(all(feature = "scheduler", not(test)))]
#[global_allocator]
static ALLOCATOR: heap::Heap = heap::Heap;

#[cfg(all(feature = "scheduler", not(test)))]
mod heap;

/// musl's `memcmp` compares a byte at a time; the scheduler's takes words (see the module).
#[cfg(all(feature = "scheduler", any(test, target_env = "musl")))]
mod memcmp;

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
