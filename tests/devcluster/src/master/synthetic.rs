//! Synthetic agents: agents with an id, resources and attributes like the others but no HTTP
//! server, no sandbox and no processes, so that a scheduler can meet 10,000 of them on one
//! machine. Their executors are emulated on the owner thread: a launch "subscribes" the
//! executor at once and it answers with TASK_RUNNING; KILL and SHUTDOWN give TASK_KILLED.
//! Every update goes through the agent's status update manager (`agent_update`) exactly as an
//! executor's UPDATE call would, so acknowledgements, retries and agent faults behave the same.

use super::agent::executor_of;
use super::launches::LaunchEvent;
use super::resources::Res;
use super::state::*;
use std::collections::BTreeMap;
use storage_framework::mesos::types::*;

/// The wait status of a process killed by SIGKILL, as the agent reports it in FAILURE.
const KILLED_BY_SIGKILL: i32 = 9;
/// The wait status of a command killed by the command executor's SIGTERM.
const KILLED_BY_SIGTERM: i32 = 15;

/// Environment of the ExecutorInfo's command that tells the storage executor where the
/// scheduler is.
const SCHEDULER_URL_VAR: &str = storage_framework::contract::env::SCHEDULER_URL;

/// The executor secret in a task's data (`{"executor_secret": "..."}`), as the storage
/// scheduler sends it and the storage executor reads it.
pub(super) fn secret_of(task: &TaskInfo) -> Option<String> {
    credentials_field(task, storage_framework::contract::env::DATA_EXECUTOR_SECRET)
}

fn credentials_field(task: &TaskInfo, name: &str) -> Option<String> {
    let data = task.data.as_ref()?;
    let v: serde_json::Value = serde_json::from_slice(&data.0).ok()?;
    v[name].as_str().map(str::to_string)
}

/// The executor secret and the scheduler's certificate fingerprint in a task's data, as the
/// scheduler sends them and the storage executor reads them.
fn credentials_of(task: &TaskInfo) -> Option<Credentials> {
    use storage_framework::contract::env;
    Some(Credentials {
        secret: credentials_field(task, env::DATA_EXECUTOR_SECRET)?,
        pin: credentials_field(task, env::DATA_SCHEDULER_FINGERPRINT)?,
    })
}

/// Never logged.
pub(super) struct Credentials {
    secret: String,
    pin: String,
}

/// What an emulated executor needs to report node phases to the scheduler's executor REST
/// API (`<scheduler>/api/v1/executors/<executor_id>/phase`), read from the ExecutorInfo
/// and the task's data as the real executor reads them.
pub(super) struct PhaseReportTarget {
    pub scheduler_url: String,
    /// Never logged.
    pub secret: String,
    /// The fingerprint of the only certificate the scheduler may present.
    pub pin: String,
    pub executor_id: String,
    /// The address the executor's connections leave from ([`synthetic_host_ip`]).
    pub source: std::net::Ipv4Addr,
    /// The devices it reports as it enters the devices phase (`MasterConfig::synthetic_storage`).
    pub devices: Vec<String>,
}

/// The address an emulated executor's calls leave from: one per agent (`127.1.0.0` plus its
/// index overall), as executors on separate hosts have. The synthetic agents themselves share
/// 127.0.0.1 unless `MasterConfig::synthetic_storage` gives each this address too. The
/// scheduler limits what one source address may hold.
pub fn synthetic_host_ip(agent: usize) -> std::net::Ipv4Addr {
    let base = u32::from(std::net::Ipv4Addr::new(127, 1, 0, 0));
    std::net::Ipv4Addr::from(base.saturating_add(agent as u32))
}

impl PhaseReportTarget {
    fn new(
        info: &ExecutorInfo,
        credentials: Option<Credentials>,
        source: std::net::Ipv4Addr,
        devices: Vec<String>,
    ) -> Option<Self> {
        let url = info
            .command
            .as_ref()
            .and_then(|c| c.environment.as_ref())
            .and_then(|e| e.variables.iter().find(|v| v.name == SCHEDULER_URL_VAR))
            .and_then(|v| v.value.as_ref())?;
        let Credentials { secret, pin } = credentials?;
        Some(PhaseReportTarget {
            scheduler_url: url.to_string(),
            secret,
            pin,
            executor_id: info.executor_id.value.to_string(),
            source,
            devices,
        })
    }
}

impl Cluster {
    /// Agent `index` overall, `synthetic-<number + 1>` by name.
    pub(super) fn add_synthetic_agent(
        &mut self,
        index: usize,
        number: usize,
        attributes: BTreeMap<String, String>,
    ) {
        // Nothing listens for a synthetic agent: anything that tries to reach it fails at once.
        let mut agent = self.new_agent(index, format!("synthetic-{}", number + 1), attributes);
        if self.cfg.synthetic_storage {
            agent.ip = synthetic_host_ip(index);
        }
        self.agents.push(agent);
    }

    /// The agent's RunTask on a synthetic agent: the executor is made up (or reused) and
    /// starts the task at once.
    pub(super) fn synthetic_run_task(
        &mut self,
        agent: usize,
        fw_id: &str,
        fw_info: &FrameworkInfo,
        task: TaskInfo,
    ) {
        let task_id = task.task_id.value.to_string();
        let (exec_info, command_task) = executor_of(&task, fw_id);
        let eid = exec_info.executor_id.value.to_string();
        let partition_aware = fw_info
            .capabilities
            .iter()
            .any(|c| c.r#type == Some(framework_info::capability::Type::PartitionAware));
        let agent_id = self.agents[agent].id.clone();
        let af = self.agents[agent]
            .frameworks
            .entry(fw_id.to_string())
            .or_insert_with(|| AgentFramework {
                info: fw_info.clone(),
                terminating: false,
                executors: BTreeMap::new(),
            });
        // A Terminated executor is replaced by a new run under the same id.
        if af
            .executors
            .get(&eid)
            .is_some_and(|e| e.state == ExecState::Terminated && e.launched.is_empty())
        {
            af.executors.remove(&eid);
        }
        if let Some(e) = af.executors.get_mut(&eid) {
            if matches!(e.state, ExecState::Terminating | ExecState::Terminated) {
                e.launched.insert(task_id.clone(), TaskState::Staging);
                let state = if partition_aware {
                    TaskState::Dropped
                } else {
                    TaskState::Lost
                };
                let status = make_status(
                    &task_id,
                    state,
                    task_status::Source::Agent,
                    Some(task_status::Reason::ExecutorTerminated),
                    "Executor terminating",
                    Some(&agent_id),
                    Some(&eid),
                    Some(fresh_uuid()),
                );
                self.agent_update(agent, fw_id, status, false);
                return;
            }
        } else {
            self.next_run += 1;
            let container_id = super::ids::new_uuid_string();
            // Where the sandbox would be; nothing is created there.
            let directory = self.agents[agent]
                .work_dir
                .join("slaves")
                .join(&agent_id)
                .join("frameworks")
                .join(fw_id)
                .join("executors")
                .join(&eid)
                .join("runs")
                .join(&container_id);
            let resources = match command_task {
                Some(_) => Res::default(),
                None => Res::from_proto(&exec_info.resources).unwrap_or_default(),
            };
            let uris = match (&self.fetcher, &command_task) {
                (Some(_), None) => exec_info
                    .command
                    .as_ref()
                    .map(|c| c.uris.clone())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let executor = Executor {
                info: exec_info.clone(),
                run: self.next_run,
                container_id,
                directory,
                // Emulated executors subscribe the moment they are launched (and fetched).
                state: if uris.is_empty() {
                    ExecState::Running
                } else {
                    ExecState::Launching
                },
                pid: None,
                conn: None,
                queued: Vec::new(),
                launched: BTreeMap::new(),
                pending_termination: None,
                resources,
                command_task: command_task.clone(),
                kill_requested: false,
                lost_with_agent: false,
                recovering: false,
            };
            let run = executor.run;
            if let Some(af) = self.agents[agent].frameworks.get_mut(fw_id) {
                af.executors.insert(eid.clone(), executor);
            }
            let host = self.agents[agent].hostname.clone();
            self.launch_log
                .record(LaunchEvent::ExecutorStarted, &host, fw_id, &eid, run, None);
            if !uris.is_empty() {
                let job = super::synthetic_fetch::Job { agent, run, uris };
                if let Some(Err(job)) = self.fetcher.as_ref().map(|f| f.fetch(job)) {
                    let error = "the fetcher has stopped".to_string();
                    let (agent, run) = (job.agent, job.run);
                    let _ = self.tx.send(super::state::Cmd::Process(
                        super::state::ProcessEvent::LaunchFailed { agent, run, error },
                    ));
                }
            }
        }
        let a = &self.agents[agent];
        let run = a
            .frameworks
            .get(fw_id)
            .and_then(|af| af.executors.get(&eid));
        let (host, run) = (a.hostname.clone(), run.map_or(0, |e| e.run));
        self.launch_log.record(
            LaunchEvent::TaskLaunched,
            &host,
            fw_id,
            &eid,
            run,
            Some(&task_id),
        );
        let fetching = self.agents[agent]
            .frameworks
            .get_mut(fw_id)
            .and_then(|af| af.executors.get_mut(&eid))
            .filter(|e| e.state == ExecState::Launching);
        if let Some(e) = fetching {
            // Started once its fetch is done (`synthetic_fetched`).
            e.queued.push(task);
            return;
        }
        let credentials = credentials_of(&task);
        let custom = command_task.is_none();
        self.synthetic_start_task(agent, fw_id, &eid, &task_id, custom, credentials);
    }

    /// The executor's URIs are fetched: it starts, and with it the tasks that waited.
    pub(super) fn synthetic_fetched(&mut self, agent: usize, run: u64, bytes: u64) {
        self.synthetic_fetches += 1;
        self.synthetic_fetched_bytes += bytes;
        let Some((fw, eid)) = self.find_run(agent, run) else {
            return;
        };
        let Some(e) = self.executor_mut(agent, &fw, &eid) else {
            return;
        };
        if e.state != ExecState::Launching {
            return;
        }
        e.state = ExecState::Running;
        let tasks: Vec<(String, Option<Credentials>)> = e
            .queued
            .drain(..)
            .map(|t| (t.task_id.value.to_string(), credentials_of(&t)))
            .collect();
        for (task_id, credentials) in tasks {
            self.synthetic_start_task(agent, &fw, &eid, &task_id, true, credentials);
        }
    }

    /// The emulated executor's answer to LAUNCH: TASK_RUNNING, then its phase reports (when
    /// `synthetic_phase_reports` asks for them).
    fn synthetic_start_task(
        &mut self,
        agent: usize,
        fw: &str,
        eid: &str,
        task_id: &str,
        custom_executor: bool,
        credentials: Option<Credentials>,
    ) {
        let a = &mut self.agents[agent];
        let Some(e) = a
            .frameworks
            .get_mut(fw)
            .and_then(|af| af.executors.get_mut(eid))
        else {
            return;
        };
        e.launched.insert(task_id.to_string(), TaskState::Staging);
        let status = make_status(
            task_id,
            TaskState::Running,
            task_status::Source::Executor,
            None,
            &format!("synthetic executor running on {}", a.hostname),
            Some(&a.id),
            Some(eid),
            Some(fresh_uuid()),
        );
        let devices = if self.cfg.synthetic_storage {
            vec!["/dev/sdb".to_string()]
        } else {
            Vec::new()
        };
        let target = custom_executor
            .then(|| {
                PhaseReportTarget::new(&e.info, credentials, synthetic_host_ip(agent), devices)
            })
            .flatten();
        // The agent plays a command task's executor: its updates are no executor's to
        // acknowledge, as in `process_event`.
        self.agent_update(agent, fw, status, custom_executor);
        // An executor that goes on to wait for plan changes walks its phases itself.
        match (target, &self.plans, &self.phases) {
            (Some(target), Some(plans), _) => plans.add(target),
            (Some(target), None, Some(phases)) => phases.add(target),
            _ => {}
        }
    }

    /// KILL on a synthetic agent: the emulated executor kills the task and keeps running, as
    /// the storage executor does; a command task's executor ends with its command.
    pub(super) fn synthetic_kill_task(&mut self, agent: usize, fw: &str, task_id: &str) {
        let a = &mut self.agents[agent];
        let found = a.frameworks.get_mut(fw).and_then(|af| {
            af.executors
                .iter_mut()
                .find(|(_, e)| e.launched.contains_key(task_id))
        });
        let Some((eid, e)) = found else {
            log::warn!(
                "{}: cannot kill task {task_id}: no executor has it",
                a.hostname
            );
            return;
        };
        let eid = eid.clone();
        if e.launched.get(task_id).is_some_and(|s| s.is_terminal()) {
            log::info!("{}: KILL of task {task_id}, which has ended", a.hostname);
            return;
        }
        if e.command_task.is_some() {
            e.kill_requested = true;
            self.executor_terminated(
                agent,
                fw,
                &eid,
                KILLED_BY_SIGTERM,
                "terminated by signal 15",
            );
            return;
        }
        let status = make_status(
            task_id,
            TaskState::Killed,
            task_status::Source::Executor,
            None,
            "killed on request",
            Some(&a.id),
            Some(&eid),
            Some(fresh_uuid()),
        );
        self.agent_update(agent, fw, status, true);
    }

    /// SHUTDOWN reached an emulated executor (already marked Terminating): it kills its live
    /// tasks and exits cleanly; its updates stay with the agent until acknowledged.
    pub(super) fn synthetic_shutdown(&mut self, agent: usize, fw: &str, eid: &str) {
        let a = &self.agents[agent];
        let Some(e) = a.frameworks.get(fw).and_then(|af| af.executors.get(eid)) else {
            return;
        };
        if e.state == ExecState::Terminated {
            return;
        }
        if e.command_task.is_some() {
            self.executor_terminated(agent, fw, eid, KILLED_BY_SIGTERM, "terminated by signal 15");
            return;
        }
        let live: Vec<String> = e
            .launched
            .iter()
            .filter(|(_, s)| !s.is_terminal())
            .map(|(t, _)| t.clone())
            .collect();
        let agent_id = a.id.clone();
        for task_id in live {
            let status = make_status(
                &task_id,
                TaskState::Killed,
                task_status::Source::Executor,
                None,
                "the executor was shut down",
                Some(&agent_id),
                Some(eid),
                Some(fresh_uuid()),
            );
            self.agent_update(agent, fw, status, true);
        }
        self.executor_terminated(agent, fw, eid, 0, "exited with status 0");
    }

    /// `kill_executor` on a synthetic agent: the emulated executor crashes as if SIGKILLed.
    pub(super) fn synthetic_crash(&mut self, agent: usize, eid: &str) -> Result<(), String> {
        let a = &self.agents[agent];
        let running = a.frameworks.iter().find_map(|(fid, af)| {
            af.executors
                .get(eid)
                .filter(|e| e.state != ExecState::Terminated)
                .map(|_| fid.clone())
        });
        let Some(fw) = running else {
            return Err(format!("executor {eid:?} on {} is not running", a.hostname));
        };
        self.executor_terminated(agent, &fw, eid, KILLED_BY_SIGKILL, "terminated by signal 9");
        Ok(())
    }

    /// The synthetic agent went down with its host: every emulated executor dies with it, as
    /// the processes of a real agent do (their updates wait for the agent to come back).
    pub(super) fn synthetic_executors_died(&mut self, agent: usize) {
        let running: Vec<(String, String)> = self.agents[agent]
            .frameworks
            .iter()
            .flat_map(|(fid, af)| {
                af.executors
                    .iter()
                    .filter(|(_, e)| e.state != ExecState::Terminated)
                    .map(move |(eid, _)| (fid.clone(), eid.clone()))
            })
            .collect();
        for (fw, eid) in running {
            self.executor_terminated(
                agent,
                &fw,
                &eid,
                KILLED_BY_SIGKILL,
                "terminated by signal 9",
            );
        }
    }
}
