//! The executor's one door to its host: facts read under a root directory ([`facts`]),
//! commands run through `PATH` by a [`commands::Runner`] and judged by exit status
//! ([`commands`], with the package database in [`packages`] and the init system in
//! [`services`]), and the decisions made from facts alone ([`devices`]). Nothing else in the
//! executor touches the host.

pub mod commands;
pub mod devices;
pub mod facts;
pub mod packages;
#[cfg(test)]
pub mod scripted;
pub mod services;
