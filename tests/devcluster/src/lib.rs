//! storage-devcluster: a faithful local stand-in for the systems the framework talks to
//! (Mesos master and agents, a Marathon-compatible launcher, the storage gateway), strict
//! enough that a framework that passes against it should pass against the real ones.

pub mod control;
pub mod exec_guard;
pub mod gateway;
pub mod host;
pub mod isolation;
pub mod launcher;
pub mod master;
