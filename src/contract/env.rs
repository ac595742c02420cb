//! Names both sides agree on outside the executor API: the environment the scheduler gives
//! its executors, the fields of `TaskInfo.data`, and the framework MESSAGE that tells running
//! executors the scheduler's new address.

/// The scheduler's executor API base URL (`https://host:port`).
pub const SCHEDULER_URL: &str = "STORAGE_SCHEDULER_URL";
/// The node's persona, by its name.
pub const PERSONA: &str = "STORAGE_PERSONA";
/// The executor's log level.
pub const LOG_LEVEL: &str = "STORAGE_EXECUTOR_LOGLEVEL";
/// A root directory the executor reads and changes the host under (the dev cluster's fake
/// hosts); unset: `/`.
pub const HOST_ROOT: &str = "STORAGE_HOST_ROOT";

/// `TaskInfo.data` is a JSON object with this field: the executor's bearer secret for the
/// executor API. The data is not served by the master's or agents' state endpoints.
pub const DATA_EXECUTOR_SECRET: &str = "executor_secret";

/// The fingerprint (`sha256:<hex>`) of the certificate the scheduler's REST server presents,
/// the only one the executor accepts: a `TaskInfo.data` field next to the secret.
pub const DATA_SCHEDULER_FINGERPRINT: &str = "scheduler_fingerprint";

/// A framework MESSAGE's JSON field with the scheduler's new REST base URL.
pub const ANNOUNCED_SCHEDULER_URL: &str = "scheduler_url";
/// The MESSAGE's field with the fingerprint of the certificate the scheduler now presents (a
/// scheduler that failed over has a new one).
pub const ANNOUNCED_FINGERPRINT: &str = "scheduler_fingerprint";
/// A framework MESSAGE's JSON field with the node plan's new version: the nudge owed to an
/// executor that asked for its plan with `nudge=1` (`{"plan_version": N}`).
pub const NUDGE_PLAN_VERSION: &str = "plan_version";

/// The executor binary's name, and the path the scheduler serves it at (`/<name>`).
pub const EXECUTOR_BINARY: &str = "storage-executor";

/// The executor label that carries the node's persona.
pub const PERSONA_LABEL: &str = "storage-persona";
