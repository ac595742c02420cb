//! Where the state lives and whether it may start a framework.
//!
//! - With no store flag, the master's `zk` flag (`GET /master/flags`) names the ensemble the
//!   usual Mesos deployment already runs: the state goes there, under
//!   `/storage-framework/<framework name>`, so a relaunched scheduler finds it from any host.
//!   Without one the file store stays, and the status page and `/health` say that the state
//!   dies with the sandbox.
//! - With no stored framework id, an active framework of the same name and role at the master
//!   means our state was lost (or another scheduler runs): registering a second one would put
//!   a second executor on every agent, so we refuse unless told (`-framework.id`, `-framework.new`).
//! - The store helpers (`-store.dump`, `-store.delete`, `-store.import`).
//!
//! The decisions are pure functions of the masters' JSON; the I/O is kept to `resolve`,
//! `guard` and `run_helper`.

use crate::mesos::client::{base_url, get_json, get_json_streamed, ClientConfig, ClientError};
use crate::scheduler::flags::Config;
use crate::scheduler::model::Persisted;
use crate::scheduler::persist::{self, StateStore};
use crate::store::{self, JournalStore, StoreHelper, StoreKind, StoreSettings};
use serde::Deserialize;
use serde_json::Value;

/// Body cap of `/master/frameworks`. Every task of every framework is listed (completed ones
/// too, up to the master's per-framework limit), so a real cluster's answer is many
/// megabytes; it is parsed as it streams in, keeping ids, names and roles only, so the cap
/// bounds time, not memory.
pub const MAX_FRAMEWORKS_BODY: u64 = 512 * 1024 * 1024;

/// The parts of `GET /master/frameworks` the guard reads; tasks, executors, offers and
/// resources are skipped while parsing.
#[derive(Debug, Default, Deserialize)]
pub struct FrameworkList {
    /// Registered frameworks, connected or failing over (`completed_frameworks` is not read).
    frameworks: Option<Vec<FrameworkEntry>>,
}

#[derive(Debug, Default, Deserialize)]
struct FrameworkEntry {
    id: Option<String>,
    name: Option<String>,
    /// Mesos before multi-role frameworks.
    role: Option<String>,
    roles: Option<Vec<String>>,
}

/// The ZooKeeper URI for our state from a master's `/flags` answer, if it has a `zk` flag;
/// the master's credentials, if any, protect our znodes too.
pub fn zk_from_master_flags(flags: &Value, framework_name: &str) -> Option<String> {
    let zk = flags.pointer("/flags/zk")?.as_str()?;
    let (hosts, _) = store::zk::parse_uri(zk, "/").ok()?;
    Some(format!(
        "zk://{}{}/storage-framework/{framework_name}",
        store::zk::userinfo(zk),
        hosts.join(",")
    ))
}

/// The id of a live framework named `name` in `role`, from `/master/frameworks`. Live means
/// listed under `frameworks` (not `completed_frameworks`): a framework whose scheduler is gone
/// shows `"active": false` there until its failover timeout ends, and its executors still run,
/// which is exactly the case of a relaunched scheduler that lost its state. An answer without
/// a `frameworks` list is an error: it proves nothing.
pub fn active_twin(list: FrameworkList, name: &str, role: &str) -> Result<Option<String>, String> {
    let frameworks = list
        .frameworks
        .ok_or("the answer has no `frameworks` list")?;
    Ok(frameworks
        .into_iter()
        .filter(|f| f.name.as_deref() == Some(name))
        .filter(|f| {
            f.role.as_deref() == Some(role)
                || f.roles
                    .as_ref()
                    .is_some_and(|r| r.iter().any(|x| x == role))
        })
        .find_map(|f| f.id))
}

/// `/master/frameworks` of the first master that answers (a standby's redirect to the
/// leader followed once), read as it streams.
fn master_frameworks(config: &Config, client: &ClientConfig) -> Result<FrameworkList, String> {
    let get = |m: &str| {
        base_url(m).and_then(|base| {
            let url = format!("{base}/master/frameworks");
            get_json_streamed::<FrameworkList>(&url, client, MAX_FRAMEWORKS_BODY)
                .map(|list| (url, list))
        })
    };
    let mut errors = Vec::new();
    for m in &config.masters {
        let answer = match get(m) {
            Err(ClientError::Redirect { leader, .. }) => get(&leader),
            other => other,
        };
        match answer {
            Ok((_, list)) if list.frameworks.is_some() => return Ok(list),
            Ok((url, _)) => errors.push(format!("GET {url}: the answer has no `frameworks` list")),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(errors.join("; "))
}

fn master_base(m: &str) -> String {
    if m.contains("://") {
        m.to_string()
    } else {
        format!("http://{m}")
    }
}

fn master_json(config: &Config, client: &ClientConfig, path: &str) -> Result<Value, String> {
    let mut errors = Vec::new();
    for m in &config.masters {
        match get_json(&format!("{}{path}", master_base(m)), client) {
            Ok(v) => return Ok(v),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(errors.join("; "))
}

/// The store to use: the flags' when given, else the master's ZooKeeper, else the file,
/// with the warning that operators must see when the state dies with the sandbox.
pub fn resolve(config: &Config, client: &ClientConfig) -> (StoreSettings, Option<String>) {
    let mut settings = config.store.clone();
    if settings.explicit {
        return (settings, None);
    }
    match master_json(config, client, "/master/flags") {
        Ok(flags) => {
            if let Some(uri) = zk_from_master_flags(&flags, &config.framework.name) {
                log::info!(
                    "no store flag: keeping state in the master's ZooKeeper, {}",
                    crate::secret::mask_uri_credentials(&uri)
                );
                settings.kind = StoreKind::ZooKeeper;
                settings.uri = uri;
                return (settings, None);
            }
        }
        Err(e) => log::warn!("cannot read the master's flags ({e}); keeping the file store"),
    }
    let note = format!(
        "state is kept in {} only: it dies with the sandbox when the scheduler is relaunched; \
         give -store.uri=<a path on durable storage>, or -store.type=zk \
         -store.uri=zk://<host:port,...>/<path>, or run the Mesos master with --zk",
        settings.uri
    );
    log::warn!("{note}");
    (settings, Some(note))
}

/// With no stored framework id: adopt `-framework.id`, or refuse beside an active twin.
pub fn guard(config: &Config, client: &ClientConfig, state: &mut Persisted) -> Result<(), String> {
    if state.model.framework_id.is_some() {
        return Ok(());
    }
    if let Some(id) = &config.store.adopt_id {
        log::info!("adopting framework {id} (-framework.id)");
        state.model.framework_id = Some(id.clone());
        return Ok(());
    }
    if config.store.force_new {
        return Ok(());
    }
    let f = &config.framework;
    if config.store.skip_guard {
        log::warn!(
            "-framework.guard=false: registering without checking the master for an active \
             framework {:?} in role {:?}",
            f.name,
            f.role
        );
        return Ok(());
    }
    let twin = master_frameworks(config, client)
        .and_then(|list| active_twin(list, &f.name, &f.role))
        .map_err(|e| {
            format!(
                "no framework id is stored and the master's framework list cannot be read ({e}), \
                 so whether framework {:?} (role {:?}) already runs is unknown: registering a \
                 second one would start a second executor on every agent. Fix the cause, or \
                 give -framework.guard=false to register without the check",
                f.name, f.role
            )
        })?;
    match twin {
        Some(id) => Err(format!(
            "no framework id is stored, but framework {id} ({:?}, role {:?}) is registered at the master: \
             registering a second one would start a second executor on every agent. \
             Adopt it with -framework.id={id}, or register anew with -framework.new",
            f.name, f.role
        )),
        None => Ok(()),
    }
}

/// Runs a store helper; returns the exit code.
pub fn run_helper(settings: &StoreSettings, helper: &StoreHelper) -> i32 {
    // A dump only reads: it works beside a running scheduler. The others write and need
    // the store to themselves.
    let opened = match helper {
        StoreHelper::Dump => store::open_read_only(settings),
        StoreHelper::Delete { .. } | StoreHelper::Import(_) => store::open(settings),
    };
    let mut target = match opened.map(StateStore::new) {
        Ok(s) => s,
        Err(e) => {
            log::error!("cannot open the state store: {e}");
            return crate::scheduler::exit::EXIT_FAILURE;
        }
    };
    let result = match helper {
        StoreHelper::Dump => target.load().map(|state| {
            let text =
                serde_json::to_string_pretty(&persist::dump_json(&state)).unwrap_or_default();
            println!("{text}");
        }),
        StoreHelper::Delete { yes: false } => {
            log::error!(
                "-store.delete removes every record in {}; add -yes to confirm",
                target.describe()
            );
            return 2;
        }
        StoreHelper::Delete { yes: true } => target.backend_mut().destroy().map(|()| {
            log::info!("deleted the state in {}", target.describe());
        }),
        StoreHelper::Import(path) => {
            if settings.kind != StoreKind::ZooKeeper {
                log::error!("-store.import copies a state file into ZooKeeper: give -store.type=zk and -store.uri=zk://...");
                return 2;
            }
            let source = JournalStore::read_only(path).map(|j| StateStore::new(Box::new(j)));
            (|| {
                let state = source?.load()?;
                let existing = target.load()?;
                if existing.model.framework_id.is_some() || !existing.model.nodes.is_empty() {
                    return Err(store::StoreError::Unsupported {
                        what: format!(
                            "{} already holds state (framework {}); delete it first with -store.delete -yes",
                            target.describe(),
                            existing.model.framework_id.as_deref().unwrap_or("none")
                        ),
                    });
                }
                target.replace(&state)?;
                log::info!(
                    "imported {} ({} nodes, framework {}) into {}",
                    path.display(),
                    state.model.nodes.len(),
                    state.model.framework_id.as_deref().unwrap_or("none"),
                    target.describe()
                );
                Ok(())
            })()
        }
    };
    match result {
        Ok(()) => crate::scheduler::exit::EXIT_OK,
        Err(e) => {
            log::error!("{e}");
            crate::scheduler::exit::EXIT_FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn master_zk_flag_names_our_path() {
        let flags =
            json!({"flags": {"zk": "zk://10.0.0.1:2181,10.0.0.2:2181/mesos", "quorum": "2"}});
        assert_eq!(
            zk_from_master_flags(&flags, "storage").as_deref(),
            Some("zk://10.0.0.1:2181,10.0.0.2:2181/storage-framework/storage")
        );
        assert_eq!(zk_from_master_flags(&json!({"flags": {}}), "s"), None);
        assert_eq!(
            zk_from_master_flags(&json!({"flags": {"zk": "nonsense"}}), "s"),
            None
        );
    }

    fn twin(body: &str, name: &str, role: &str) -> Result<Option<String>, String> {
        let list: FrameworkList = serde_json::from_reader(body.as_bytes()).unwrap();
        active_twin(list, name, role)
    }

    #[test]
    fn active_twin_matches_name_role_and_activity() {
        let fw = json!({"frameworks": [
            {"id": "other-role", "name": "storage", "role": "x", "active": true},
            {"id": "other-name", "name": "marathon", "role": "*", "active": true},
            {"id": "twin", "name": "storage", "roles": ["*"], "active": true}
        ], "completed_frameworks": [{"id": "done", "name": "storage", "role": "*"}]})
        .to_string();
        assert_eq!(twin(&fw, "storage", "*"), Ok(Some("twin".into())));
        // Disconnected, failing over: still live, its executors still run.
        let failing_over = json!({"frameworks": [
            {"id": "away", "name": "storage", "role": "*", "active": false}
        ]})
        .to_string();
        assert_eq!(twin(&failing_over, "storage", "*"), Ok(Some("away".into())));
        assert_eq!(twin(&fw, "storage", "y"), Ok(None));
        assert_eq!(twin(r#"{"frameworks": []}"#, "storage", "*"), Ok(None));
        assert!(
            twin("{}", "storage", "*").is_err(),
            "no list proves nothing"
        );
    }

    /// Mesos lists every task of every framework: a real cluster's answer is far over a
    /// mebibyte, and only ids, names and roles are kept from it.
    #[test]
    fn a_list_of_many_megabytes_of_tasks_still_finds_the_twin() {
        let task = |i: usize| {
            json!({"id": format!("task-{i}"), "name": "web", "framework_id": "m1",
                   "slave_id": format!("agent-{i}"), "state": "TASK_RUNNING",
                   "resources": {"cpus": 0.5, "mem": 128.0, "disk": 0.0},
                   "statuses": [{"state": "TASK_RUNNING", "timestamp": 1.5e9}]})
        };
        let many: Vec<Value> = (0..20_000).map(task).collect();
        let body = json!({"frameworks": [
            {"id": "m1", "name": "marathon", "role": "*", "tasks": many, "completed_tasks": many},
            {"id": "twin", "name": "storage", "role": "*", "tasks": [task(0)]}
        ]})
        .to_string();
        assert!(body.len() > 4 * 1024 * 1024, "{}", body.len());
        assert_eq!(twin(&body, "storage", "*"), Ok(Some("twin".into())));
    }
}
