//! The contract between the scheduler and its executor: the two binaries are built from this
//! one module, so a change one side does not follow fails to compile instead of failing on a
//! node. It holds the node's phases and personas, the platforms and what differs between them
//! ([`platform::Profile`]), the node plan and the executor's reports, the executor API's routes,
//! the task and executor id schemes, and the names of environment variables and `TaskInfo.data`
//! fields.
//!
//! It depends on nothing else of the crate and is built without the `scheduler` feature: the
//! executor links it.

pub mod api;
pub mod env;
pub mod health;
pub mod ids;
pub mod persona;
pub mod phase;
pub mod plan;
pub mod platform;
pub mod rollout;

pub use persona::Persona;
pub use phase::Phase;
pub use platform::{profile, Platform, Profile};
