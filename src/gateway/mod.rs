//! The storage gateway's REST API, as a layer below the scheduler (like `mesos`): the HTTPS
//! client, its wire errors and the MDM return codes. What the scheduler does with the gateway
//! (start-up checks, reconciliation planning, the worker thread) lives in
//! `scheduler::storage`.

pub mod client;
