//! The scheduler's side of the storage gateway: the HTTPS client, the prerequisite checks run
//! before subscribing, the pure reconciliation planning and the gateway worker thread.

pub mod client;
