//! Everything the scheduler says to and reads from the Mesos master: the subscription
//! (events in), the call sender (calls out), the agent watcher (`/master/slaves`), and the
//! connection settings and framework identity they share.

pub mod agent_watcher;
pub mod sender;
pub mod subscription;

use crate::mesos::client::{ClientConfig, SchedulerClient};
use crate::mesos::types::{framework_info, FrameworkInfo};
use crate::mesos::Encoding;
use crate::scheduler::flags::Config;
use std::time::Duration;

/// The HTTP settings of every connection to a master.
pub fn client_config(config: &Config) -> ClientConfig {
    client_config_for(config.encoding)
}

/// The HTTP settings of every connection to a master that speaks `encoding`.
pub fn client_config_for(encoding: Encoding) -> ClientConfig {
    ClientConfig {
        encoding,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(15),
        stream_idle_timeout: None,
        // Events other than OFFERS are kilobytes; a lower cap than RecordIO's default limits
        // what one hostile record can make the scheduler allocate.
        max_event_bytes: 4 * 1024 * 1024,
        // One OFFERS event can hold an offer of every agent. At 10,000 agents, offers with
        // reserved and unreserved resources, a URL and eight attributes make 19 MB in JSON
        // (8 MB in protobuf; tests/client.rs builds that event): 128 MiB leaves room for
        // offers seven times as rich (labels, disk sources, domains) and still bounds what
        // one record can make the scheduler hold.
        max_offers_event_bytes: 128 * 1024 * 1024,
    }
}

pub fn framework_info(config: &Config) -> FrameworkInfo {
    let f = &config.framework;
    FrameworkInfo {
        user: f.user.as_str().into(),
        name: f.name.as_str().into(),
        failover_timeout: Some(f.failover_timeout.as_secs_f64()),
        checkpoint: Some(true),
        role: Some(f.role.as_str().into()),
        hostname: f.hostname.as_deref().map(Into::into),
        webui_url: Some(format!("{}/ui", config.scheduler_url()).into()),
        capabilities: [
            framework_info::capability::Type::PartitionAware,
            framework_info::capability::Type::TaskKillingState,
        ]
        .into_iter()
        .map(|t| framework_info::Capability { r#type: Some(t) })
        .collect(),
        ..Default::default()
    }
}

/// Refuses masters older than 1.0 (the v1 API's first release). The first master that
/// answers decides; none answering is an error too. Returns the master's version.
pub fn check_version(config: &Config) -> Result<String, String> {
    let mut errors = Vec::new();
    for m in &config.masters {
        let client = SchedulerClient::new(m, client_config(config)).map_err(|e| e.to_string())?;
        match client.master_version() {
            Ok(v) => {
                return match v.at_least(1, 0) {
                    Ok(true) => Ok(v.version),
                    Ok(false) => Err(format!(
                        "master {m} runs Mesos {}, older than the required 1.0",
                        v.version
                    )),
                    Err(e) => Err(format!("master {m}: {e}")),
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(format!(
        "no master answered GET /version: {}",
        errors.join("; ")
    ))
}
