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
