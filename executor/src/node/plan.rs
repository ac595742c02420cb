//! The node plan as the scheduler serves it (`GET /api/v1/executors/<id>/plan`): the
//! contract's types, owned. Fields the executor does not use are ignored; a missing optional
//! field takes its default, so an older scheduler's plan still parses.

pub use storage_framework::contract::plan::{
    Check, ClusterInit, Download, NodePlan, ScliStep, StdinPassword,
};

/// A plan as this executor holds it.
pub type Plan = NodePlan<'static>;
