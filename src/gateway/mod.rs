//! The storage gateway's REST API, as a layer below the scheduler (like `mesos`): typed
//! calls ([`api`]) with their requests and answers ([`types`]) and paths ([`paths`]), over
//! the HTTPS client ([`client`]: login, token, retries, TLS, wire errors, MDM return codes)
//! and how it checks the gateway's certificate ([`trust`]); a listing is cut into its items
//! as it streams ([`listing`]).
//! What the scheduler does with the gateway (start-up checks, reconciliation planning, the
//! worker thread) lives in `scheduler::gateway_work`.

pub mod api;
pub mod client;
pub mod listing;
pub mod paths;
pub mod trust;
pub mod types;
