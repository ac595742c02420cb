//! The executor's one door to its host: facts read under a root directory ([`facts`]),
//! commands run through `PATH` and judged by exit status ([`commands`]), and the decisions
//! made from facts alone ([`devices`]). Nothing else in the executor touches the host.

pub mod commands;
pub mod devices;
pub mod facts;
pub mod packages;
