//! The agents' half of the cluster owner: executors and their processes, the v1 executor
//! API, the status update manager (ordered, retried until acknowledged) and agent faults.

use super::http::{Reply, Response, Server, Stream, StreamMsg};
use super::launches::LaunchEvent;
use super::process::{self, mesos_duration, LaunchSpec, SIGKILL, SIGTERM};
use super::resources::Res;
use super::state::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use storage_framework::mesos::executor::{self, call as ecall, event as eevent};
use storage_framework::mesos::scheduler::event;
use storage_framework::mesos::types::*;
use storage_framework::mesos::Str;
use storage_framework::mesos::{Bytes, Encoding};

/// The command executor's default grace between SIGTERM and SIGKILL.
const COMMAND_KILL_GRACE: Duration = Duration::from_secs(3);

fn exec_event(t: eevent::Type) -> executor::Event {
    executor::Event {
        r#type: Some(t),
        ..Default::default()
    }
}

/// A Mesos agent attribute from its text form, typed the way `--attributes` is parsed:
/// numbers are scalars, `[a-b,...]` ranges, `{a,b}` sets, anything else text.
pub fn parse_attribute(name: &str, raw: &str) -> Attribute {
    let mut a = Attribute {
        name: name.into(),
        r#type: value::Type::Text,
        ..Default::default()
    };
    let numeric = !raw.is_empty()
        && raw
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        && raw.chars().any(|c| c.is_ascii_digit());
    if let (true, Ok(v)) = (numeric, raw.parse::<f64>()) {
        if v.is_finite() {
            a.r#type = value::Type::Scalar;
            a.scalar = Some(value::Scalar { value: v });
            return a;
        }
    }
    if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let ranges: Option<Vec<value::Range>> = inner
            .split(',')
            .map(|p| {
                let (b, e) = p.trim().split_once('-')?;
                Some(value::Range {
                    begin: b.trim().parse().ok()?,
                    end: e.trim().parse().ok()?,
                })
            })
            .collect();
        if let Some(range) = ranges {
            a.r#type = value::Type::Ranges;
            a.ranges = Some(value::Ranges { range });
            return a;
        }
    }
    if let Some(inner) = raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        a.r#type = value::Type::Set;
        a.set = Some(value::Set {
            item: inner.split(',').map(|s| Str::from(s.trim())).collect(),
        });
        return a;
    }
    a.text = Some(value::Text { value: raw.into() });
    a
}

impl Cluster {
    pub(super) fn add_agent(
        &mut self,
        index: usize,
        attributes: BTreeMap<String, String>,
    ) -> Result<(), String> {
        let n = index + 1;
        let hostname = format!("agent-{n}");
        let wanted = if self.cfg.distinct_agent_ips && n < 254 {
            Ipv4Addr::new(127, 0, 0, (n + 1) as u8)
        } else {
            Ipv4Addr::LOCALHOST
        };
        let handler =
            super::endpoints::agent_handler(index, self.tx.clone(), self.cfg.wire_tap.clone());
        let server = match Server::bind(SocketAddr::from((wanted, 0)), &hostname, handler.clone()) {
            Ok(s) => s,
            // Some systems route only 127.0.0.1; the agents then share it.
            Err(_) => Server::bind(
                SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                &hostname,
                handler,
            )
            .map_err(|e| format!("{hostname}: cannot listen on 127.0.0.1: {e}"))?,
        };
        let addr = server.addr();
        let ip = match addr {
            SocketAddr::V4(a) => *a.ip(),
            SocketAddr::V6(_) => Ipv4Addr::LOCALHOST,
        };
        let mut agent = self.new_agent(index, hostname, attributes);
        agent.ip = ip;
        agent.port = addr.port();
        agent.server = Some(server);
        agent.synthetic = false;
        self.agents.push(agent);
        Ok(())
    }

    /// An agent as every kind starts: registered now, the configured resources, these
    /// attributes, nobody listening for it (synthetic); a real agent then fills in its
    /// server and address.
    pub(super) fn new_agent(
        &self,
        index: usize,
        hostname: String,
        attributes: BTreeMap<String, String>,
    ) -> Agent {
        let r = &self.cfg.agent_resources;
        Agent {
            id: format!("{}-S{index}", self.masters[0].id),
            work_dir: self.cfg.work_dir.join(&hostname),
            hostname,
            ip: Ipv4Addr::LOCALHOST,
            port: 0,
            server: None,
            synthetic: true,
            up: true,
            unreachable: false,
            removed: false,
            partitioned: false,
            unreachable_time: None,
            rebooting_as: None,
            generation: 0,
            total: match &r.reserved {
                Some(x) => Res::new(r.cpus, r.mem, r.disk, vec![r.ports])
                    .with_reserved(&x.role, x.cpus, x.mem),
                None => Res::new(r.cpus, r.mem, r.disk, vec![r.ports]),
            },
            attributes: attributes
                .iter()
                .map(|(k, v)| parse_attribute(k, v))
                .collect(),
            attributes_text: attributes,
            registered_time: now_secs(),
            frameworks: BTreeMap::new(),
            streams: BTreeMap::new(),
        }
    }

    pub(super) fn executor_mut(
        &mut self,
        agent: usize,
        fw: &str,
        eid: &str,
    ) -> Option<&mut Executor> {
        self.agents
            .get_mut(agent)?
            .frameworks
            .get_mut(fw)?
            .executors
            .get_mut(eid)
    }

    pub(super) fn find_run(&self, agent: usize, run: u64) -> Option<(String, String)> {
        let a = self.agents.get(agent)?;
        a.frameworks.iter().find_map(|(fid, af)| {
            af.executors
                .iter()
                .find(|(_, e)| e.run == run)
                .map(|(eid, _)| (fid.clone(), eid.clone()))
        })
    }

    /// The agent's RunTask: queue the task on its executor, launching that if needed.
    pub(super) fn run_task(
        &mut self,
        agent: usize,
        fw_id: &str,
        fw_info: &FrameworkInfo,
        task: TaskInfo,
    ) {
        let secret = super::synthetic::secret_of(&task);
        self.launch_log.note_secret(&task.task_id.value, secret);
        if self.agents[agent].synthetic {
            self.synthetic_run_task(agent, fw_id, fw_info, task);
            return;
        }
        let task_id = task.task_id.value.to_string();
        let (exec_info, command_task) = executor_of(&task, fw_id);
        let eid = exec_info.executor_id.value.to_string();
        let af = self.agents[agent]
            .frameworks
            .entry(fw_id.to_string())
            .or_insert_with(|| AgentFramework {
                info: fw_info.clone(),
                terminating: false,
                executors: BTreeMap::new(),
            });
        let partition_aware = fw_info
            .capabilities
            .iter()
            .any(|c| c.r#type == Some(framework_info::capability::Type::PartitionAware));
        // A Terminated executor is replaced by a new run under the same id.
        if af
            .executors
            .get(&eid)
            .is_some_and(|e| e.state == ExecState::Terminated && e.launched.is_empty())
        {
            af.executors.remove(&eid);
        }
        if let Some(e) = af.executors.get_mut(&eid) {
            match e.state {
                ExecState::Terminating | ExecState::Terminated => {
                    let state = if partition_aware {
                        TaskState::Dropped
                    } else {
                        TaskState::Lost
                    };
                    e.launched.insert(task_id.clone(), TaskState::Staging);
                    let status = make_status(
                        &task_id,
                        state,
                        task_status::Source::Agent,
                        Some(task_status::Reason::ExecutorTerminated),
                        "Executor terminating",
                        Some(&self.agents[agent].id.clone()),
                        Some(&eid),
                        Some(fresh_uuid()),
                    );
                    self.agent_update(agent, fw_id, status, false);
                }
                ExecState::Running if e.conn.is_some() => {
                    let run = e.run;
                    e.launched.insert(task_id.clone(), TaskState::Staging);
                    if let Some(conn) = &e.conn {
                        let mut ev = exec_event(eevent::Type::Launch);
                        ev.launch = Some(eevent::Launch { task });
                        let _ = conn.tx.send(frame(conn.encoding, &ev));
                    }
                    let host = self.agents[agent].hostname.clone();
                    self.launch_log.record(
                        LaunchEvent::TaskLaunched,
                        &host,
                        fw_id,
                        &eid,
                        run,
                        Some(&task_id),
                    );
                }
                _ => {
                    let run = e.run;
                    e.queued.push(task);
                    let host = self.agents[agent].hostname.clone();
                    self.launch_log.record(
                        LaunchEvent::TaskLaunched,
                        &host,
                        fw_id,
                        &eid,
                        run,
                        Some(&task_id),
                    );
                }
            }
            return;
        }
        self.next_run += 1;
        let run = self.next_run;
        let container_id = super::ids::new_uuid_string();
        let a = &self.agents[agent];
        let directory = a
            .work_dir
            .join("slaves")
            .join(&a.id)
            .join("frameworks")
            .join(fw_id)
            .join("executors")
            .join(&eid)
            .join("runs")
            .join(&container_id);
        let checkpoint = fw_info.checkpoint.unwrap_or(false);
        let grace = exec_info
            .shutdown_grace_period
            .as_ref()
            .map(|g| Duration::from_nanos(g.nanoseconds.max(0) as u64))
            .unwrap_or(self.cfg.executor_shutdown_grace_period);
        let dir_text = directory.to_string_lossy().into_owned();
        let mut env = vec![
            ("LIBPROCESS_PORT".to_string(), "0".to_string()),
            ("MESOS_FRAMEWORK_ID".into(), fw_id.to_string()),
            ("MESOS_EXECUTOR_ID".into(), eid.clone()),
            ("MESOS_DIRECTORY".into(), dir_text.clone()),
            ("MESOS_SANDBOX".into(), dir_text),
            ("MESOS_SLAVE_ID".into(), a.id.clone()),
            ("MESOS_SLAVE_PID".into(), a.pid()),
            ("MESOS_AGENT_ENDPOINT".into(), a.endpoint().to_string()),
            (
                "MESOS_CHECKPOINT".into(),
                if checkpoint { "1" } else { "0" }.into(),
            ),
            ("MESOS_HTTP_COMMAND_EXECUTOR".into(), "0".into()),
            (
                "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD".into(),
                mesos_duration(grace),
            ),
        ];
        if let Some(h) = &self.cfg.host_standins {
            env.extend(crate::host::executor_env(h, &a.work_dir));
        }
        // The real agent sets these two only for checkpointing frameworks.
        if checkpoint {
            env.push((
                "MESOS_RECOVERY_TIMEOUT".into(),
                mesos_duration(self.cfg.recovery_timeout),
            ));
            env.push((
                "MESOS_SUBSCRIPTION_BACKOFF_MAX".into(),
                mesos_duration(self.cfg.executor_reregistration_timeout),
            ));
        }
        let resources = if command_task.is_some() {
            Res::default()
        } else {
            Res::from_proto(&exec_info.resources).unwrap_or_default()
        };
        let spec = LaunchSpec {
            agent,
            run,
            directory: directory.clone(),
            command: exec_info.command.clone().unwrap_or_default(),
            env,
            limits: process::container_limits(&resources, &task, command_task.is_some()),
        };
        let host = self.agents[agent].hostname.clone();
        for event in [LaunchEvent::ExecutorStarted, LaunchEvent::TaskLaunched] {
            let task = (event == LaunchEvent::TaskLaunched).then_some(task_id.as_str());
            self.launch_log.record(event, &host, fw_id, &eid, run, task);
        }
        let Some(af) = self.agents[agent].frameworks.get_mut(fw_id) else {
            return;
        };
        af.executors.insert(
            eid,
            Executor {
                info: exec_info,
                run,
                container_id,
                directory,
                state: ExecState::Launching,
                pid: None,
                conn: None,
                queued: vec![task],
                launched: BTreeMap::new(),
                pending_termination: None,
                resources,
                command_task,
                kill_requested: false,
                lost_with_agent: false,
                recovering: false,
            },
        );
        process::launch(spec, self.tx.clone());
    }

    pub(super) fn process_event(&mut self, ev: ProcessEvent) {
        match ev {
            ProcessEvent::Started { agent, run, pid } => {
                let Some((fw, eid)) = self.find_run(agent, run) else {
                    process::signal_group(pid, SIGKILL);
                    return;
                };
                let up = self.agents[agent].up;
                let agent_id = self.agents[agent].id.clone();
                let timeout = self.cfg.executor_registration_timeout;
                let Some(e) = self.executor_mut(agent, &fw, &eid) else {
                    return;
                };
                e.pid = Some(pid);
                if !up || e.state == ExecState::Terminating {
                    e.lost_with_agent |= !up;
                    process::signal_group(pid, SIGKILL);
                    return;
                }
                if let Some(task_id) = e.command_task.clone() {
                    // The agent plays the command executor: the command itself is the task.
                    e.state = ExecState::Running;
                    for t in e.queued.drain(..) {
                        e.launched
                            .insert(t.task_id.value.to_string(), TaskState::Staging);
                    }
                    let status = make_status(
                        &task_id,
                        TaskState::Running,
                        task_status::Source::Executor,
                        None,
                        "",
                        Some(&agent_id),
                        Some(&eid),
                        Some(fresh_uuid()),
                    );
                    self.agent_update(agent, &fw, status, false);
                    return;
                }
                if e.state == ExecState::Launching {
                    e.state = ExecState::Registering;
                    self.schedule(timeout, Timer::Registration { agent, run });
                }
            }
            ProcessEvent::LaunchFailed { agent, run, error } => {
                let Some((fw, eid)) = self.find_run(agent, run) else {
                    return;
                };
                log::warn!("executor {eid} on agent-{}: {error}", agent + 1);
                if let Some(e) = self.executor_mut(agent, &fw, &eid) {
                    e.pending_termination = Some((
                        TaskState::Failed,
                        task_status::Reason::ContainerLaunchFailed,
                        format!("Failed to launch container: {error}"),
                    ));
                }
                self.executor_terminated(agent, &fw, &eid, -1, "");
            }
            ProcessEvent::Limited {
                agent,
                run,
                message,
            } => {
                let Some((fw, eid)) = self.find_run(agent, run) else {
                    return;
                };
                log::warn!("executor {eid} on agent-{}: {message}", agent + 1);
                if let Some(e) = self.executor_mut(agent, &fw, &eid) {
                    e.pending_termination = Some((
                        TaskState::Failed,
                        task_status::Reason::ContainerLimitationMemory,
                        message,
                    ));
                }
            }
            ProcessEvent::Fetched { agent, run, bytes } => {
                self.synthetic_fetched(agent, run, bytes);
            }
            ProcessEvent::Exited {
                agent,
                run,
                status,
                description,
            } => {
                let Some((fw, eid)) = self.find_run(agent, run) else {
                    return;
                };
                log::info!("executor {eid} on agent-{} {description}", agent + 1);
                self.executor_terminated(agent, &fw, &eid, status, &description);
            }
        }
    }

    /// The agent's executorTerminated: live tasks get a terminal update, the master a FAILURE.
    pub(super) fn executor_terminated(
        &mut self,
        agent: usize,
        fw: &str,
        eid: &str,
        status: i32,
        description: &str,
    ) {
        let agent_id = self.agents[agent].id.clone();
        let up = self.agents[agent].up;
        let terminating = self.agents[agent]
            .frameworks
            .get(fw)
            .is_some_and(|f| f.terminating);
        let host = self.agents[agent].hostname.clone();
        let Some(e) = self.executor_mut(agent, fw, eid) else {
            return;
        };
        if e.state != ExecState::Terminated {
            let run = e.run;
            self.launch_log
                .record(LaunchEvent::ExecutorTerminated, &host, fw, eid, run, None);
        }
        let Some(e) = self.executor_mut(agent, fw, eid) else {
            return;
        };
        e.state = ExecState::Terminated;
        e.pid = None;
        if let Some(c) = e.conn.take() {
            let _ = c.tx.send(StreamMsg::Close);
        }
        let command = e.command_task.is_some();
        let lost = e.lost_with_agent;
        for t in e.queued.drain(..) {
            e.launched
                .insert(t.task_id.value.to_string(), TaskState::Staging);
        }
        let live: Vec<String> = e
            .launched
            .iter()
            .filter(|(_, s)| !s.is_terminal())
            .map(|(t, _)| t.clone())
            .collect();
        let (state, source, reason, message) = match e.pending_termination.take() {
            Some((s, r, m)) => (s, task_status::Source::Agent, Some(r), m),
            None if command && !lost => command_outcome(status, description, e.kill_requested),
            None => (
                TaskState::Failed,
                task_status::Source::Agent,
                Some(task_status::Reason::ExecutorTerminated),
                "Executor terminated".to_string(),
            ),
        };
        if !terminating {
            for task_id in live {
                let st = make_status(
                    &task_id,
                    state,
                    source,
                    reason,
                    &message,
                    Some(&agent_id),
                    Some(eid),
                    Some(fresh_uuid()),
                );
                self.agent_update(agent, fw, st, false);
            }
        }
        if !command && up && !lost && !terminating {
            let mut ev = sched_event(event::Type::Failure);
            ev.failure = Some(event::Failure {
                agent_id: Some(AgentID {
                    value: agent_id.into(),
                }),
                executor_id: Some(ExecutorID { value: eid.into() }),
                status: Some(status),
            });
            self.send(fw, &ev);
        }
        self.request_allocation();
        self.cleanup_executor(agent, fw, eid);
    }

    fn cleanup_executor(&mut self, agent: usize, fw: &str, eid: &str) {
        let Some(af) = self.agents[agent].frameworks.get_mut(fw) else {
            return;
        };
        let done = af.executors.get(eid).is_some_and(|e| {
            e.state == ExecState::Terminated && e.launched.is_empty() && e.queued.is_empty()
        });
        if done {
            af.executors.remove(eid);
        }
        self.cleanup_agent_framework(agent, fw);
    }

    pub(super) fn cleanup_agent_framework(&mut self, agent: usize, fw: &str) {
        let a = &mut self.agents[agent];
        let remove = a.frameworks.get(fw).is_some_and(|af| {
            af.executors.is_empty()
                || (af.terminating
                    && af
                        .executors
                        .values()
                        .all(|e| e.state == ExecState::Terminated))
        });
        if remove {
            a.frameworks.remove(fw);
        }
    }

    pub(super) fn registration_timeout(&mut self, agent: usize, run: u64) {
        let Some((fw, eid)) = self.find_run(agent, run) else {
            return;
        };
        let timeout = self.cfg.executor_registration_timeout;
        let Some(e) = self.executor_mut(agent, &fw, &eid) else {
            return;
        };
        if e.state != ExecState::Registering {
            return;
        }
        log::warn!("executor {eid} did not subscribe within {timeout:?}: killing it");
        e.state = ExecState::Terminating;
        e.pending_termination = Some((
            TaskState::Failed,
            task_status::Reason::ExecutorRegistrationTimeout,
            format!(
                "Executor did not register within {}",
                mesos_duration(timeout)
            ),
        ));
        if let Some(pid) = e.pid {
            process::signal_group(pid, SIGKILL);
        }
    }

    pub(super) fn shutdown_grace_over(&mut self, agent: usize, run: u64) {
        let Some((fw, eid)) = self.find_run(agent, run) else {
            return;
        };
        let Some(e) = self.executor_mut(agent, &fw, &eid) else {
            return;
        };
        if e.state != ExecState::Terminated {
            if let Some(pid) = e.pid {
                process::signal_group(pid, SIGKILL);
            }
        }
    }

    /// SHUTDOWN to the executor, then a kill once its grace period is over.
    pub(super) fn shutdown_executor(&mut self, agent: usize, fw: &str, eid: &str) {
        let default_grace = self.cfg.executor_shutdown_grace_period;
        let Some(e) = self.executor_mut(agent, fw, eid) else {
            return;
        };
        if matches!(e.state, ExecState::Terminating | ExecState::Terminated) {
            return;
        }
        e.state = ExecState::Terminating;
        if let Some(conn) = &e.conn {
            let _ = conn
                .tx
                .send(frame(conn.encoding, &exec_event(eevent::Type::Shutdown)));
        }
        if e.command_task.is_some() {
            e.kill_requested = true;
            if let Some(pid) = e.pid {
                process::signal_group(pid, SIGTERM);
            }
        }
        let grace = e
            .info
            .shutdown_grace_period
            .as_ref()
            .map(|g| Duration::from_nanos(g.nanoseconds.max(0) as u64))
            .unwrap_or(default_grace);
        let run = e.run;
        self.schedule(grace, Timer::ShutdownGrace { agent, run });
        if self.agents[agent].synthetic {
            self.synthetic_shutdown(agent, fw, eid);
        }
    }

    pub(super) fn kill_task(
        &mut self,
        agent: usize,
        fw: &str,
        task_id: &str,
        kill_policy: Option<KillPolicy>,
    ) {
        if self.agents[agent].synthetic {
            self.synthetic_kill_task(agent, fw, task_id);
            return;
        }
        let agent_id = self.agents[agent].id.clone();
        let Some(af) = self.agents[agent].frameworks.get_mut(fw) else {
            return;
        };
        let found = af.executors.iter_mut().find(|(_, e)| {
            e.launched.contains_key(task_id) || e.queued.iter().any(|t| t.task_id.value == task_id)
        });
        let Some((eid, e)) = found else {
            log::warn!(
                "agent-{}: cannot kill task {task_id}: no executor has it",
                agent + 1
            );
            return;
        };
        let eid = eid.clone();
        if let Some(pos) = e.queued.iter().position(|t| t.task_id.value == task_id) {
            e.queued.remove(pos);
            e.launched.insert(task_id.to_string(), TaskState::Staging);
            let status = make_status(
                task_id,
                TaskState::Killed,
                task_status::Source::Agent,
                Some(task_status::Reason::TaskKilledDuringLaunch),
                "Killed before delivery to the executor",
                Some(&agent_id),
                Some(&eid),
                Some(fresh_uuid()),
            );
            self.agent_update(agent, fw, status, false);
            return;
        }
        if e.command_task.is_some() {
            e.kill_requested = true;
            if let Some(pid) = e.pid {
                process::signal_group(pid, SIGTERM);
            }
            let grace = kill_policy
                .and_then(|k| k.grace_period)
                .map(|g| Duration::from_nanos(g.nanoseconds.max(0) as u64))
                .unwrap_or(COMMAND_KILL_GRACE);
            let run = e.run;
            self.schedule(grace, Timer::ShutdownGrace { agent, run });
            return;
        }
        match &e.conn {
            Some(conn) => {
                let mut ev = exec_event(eevent::Type::Kill);
                ev.kill = Some(eevent::Kill {
                    task_id: TaskID {
                        value: task_id.into(),
                    },
                    kill_policy,
                });
                let _ = conn.tx.send(frame(conn.encoding, &ev));
            }
            None => log::warn!("executor {eid} is not subscribed: KILL of {task_id} dropped"),
        }
    }

    // ---- status update manager ----

    /// Takes an update into the task's stream; the first one pending goes to the master.
    pub(super) fn agent_update(
        &mut self,
        agent: usize,
        fw: &str,
        status: TaskStatus,
        from_executor: bool,
    ) {
        let retry = self.cfg.status_update_retry;
        let a = &mut self.agents[agent];
        let Some(af) = a.frameworks.get_mut(fw) else {
            return;
        };
        if af.terminating {
            return;
        }
        let Some(uuid) = status.uuid.as_ref().map(|u| u.0.clone()) else {
            return;
        };
        let task_id = status.task_id.value.to_string();
        for e in af.executors.values_mut() {
            if let Some(s) = e.launched.get_mut(&task_id) {
                *s = status.state;
                break;
            }
        }
        let key = (fw.to_string(), task_id.clone());
        let stream = a.streams.entry(key).or_insert_with(|| UpdateStream {
            pending: VecDeque::new(),
            seen: HashSet::new(),
            generation: 0,
            interval: retry,
        });
        if !stream.seen.insert(uuid) {
            return;
        }
        stream.pending.push_back(PendingUpdate {
            status,
            from_executor,
        });
        if stream.pending.len() == 1 {
            self.forward_head(agent, fw, &task_id);
        }
    }

    pub(super) fn forward_head(&mut self, agent: usize, fw: &str, task_id: &str) {
        if !self.agents[agent].up {
            return;
        }
        let key = (fw.to_string(), task_id.to_string());
        let Some(stream) = self.agents[agent].streams.get_mut(&key) else {
            return;
        };
        let Some(head) = stream.pending.front() else {
            return;
        };
        let status = head.status.clone();
        stream.generation += 1;
        let generation = stream.generation;
        let interval = stream.interval;
        stream.interval = (interval * 2).min(super::state::MAX_UPDATE_RETRY);
        self.schedule(
            interval,
            Timer::UpdateRetry {
                agent,
                framework: fw.to_string(),
                task: task_id.to_string(),
                generation,
            },
        );
        // An agent that has not re-registered with a new leader cannot reach it: its
        // updates wait for the retry after it has.
        if !self.faults.transitioning(agent) {
            self.master_update(agent, fw, status);
        }
    }

    pub(super) fn retry_update(&mut self, agent: usize, fw: String, task: String, generation: u64) {
        let due = self.agents[agent]
            .streams
            .get(&(fw.clone(), task.clone()))
            .is_some_and(|s| s.generation == generation && !s.pending.is_empty());
        if due {
            self.forward_head(agent, &fw, &task);
        }
    }

    /// The agent's side of a scheduler ACKNOWLEDGE.
    pub(super) fn agent_acknowledge(&mut self, agent: usize, fw: &str, task_id: &str, uuid: &[u8]) {
        let retry = self.cfg.status_update_retry;
        let key = (fw.to_string(), task_id.to_string());
        let a = &mut self.agents[agent];
        let Some(stream) = a.streams.get_mut(&key) else {
            log::warn!("acknowledgement for task {task_id} without pending updates");
            return;
        };
        let matches = stream
            .pending
            .front()
            .and_then(|h| h.status.uuid.as_ref())
            .is_some_and(|u| u.0 == uuid);
        if !matches {
            log::warn!(
                "unexpected acknowledgement {} for task {task_id}",
                uuid_text(uuid)
            );
            return;
        }
        let Some(done) = stream.pending.pop_front() else {
            return;
        };
        stream.generation += 1;
        stream.interval = retry;
        let more = !stream.pending.is_empty();
        let terminal = done.status.state.is_terminal();
        if !more && terminal {
            a.streams.remove(&key);
        }
        let mut executor = None;
        if let Some(af) = a.frameworks.get_mut(fw) {
            for (eid, e) in af.executors.iter_mut() {
                if !e.launched.contains_key(task_id) {
                    continue;
                }
                if done.from_executor {
                    if let Some(conn) = &e.conn {
                        let mut ev = exec_event(eevent::Type::Acknowledged);
                        ev.acknowledged = Some(eevent::Acknowledged {
                            task_id: TaskID {
                                value: task_id.into(),
                            },
                            uuid: Bytes(uuid.to_vec()),
                        });
                        let _ = conn.tx.send(frame(conn.encoding, &ev));
                    }
                }
                if terminal && !more {
                    e.launched.remove(task_id);
                }
                executor = Some(eid.clone());
                break;
            }
        }
        if more {
            self.forward_head(agent, fw, task_id);
        }
        if let Some(eid) = executor {
            self.cleanup_executor(agent, fw, &eid);
        }
    }

    // ---- the v1 executor API ----

    pub(super) fn executor_call(
        &mut self,
        agent: usize,
        call: executor::Call,
        accept: Encoding,
    ) -> Reply {
        let fw = call.framework_id.value.to_string();
        let eid = call.executor_id.value.to_string();
        let Some(af) = self.agents.get(agent).and_then(|a| a.frameworks.get(&fw)) else {
            return Response::text(400, "Framework cannot be found").into();
        };
        let Some(e) = af.executors.get(&eid) else {
            return Response::text(400, "Executor cannot be found").into();
        };
        let t = call.r#type.unwrap_or(ecall::Type::Unknown);
        let registering = matches!(e.state, ExecState::Launching | ExecState::Registering);
        if registering && t != ecall::Type::Subscribe {
            return Response::text(403, "Executor is not subscribed").into();
        }
        let agent_id = self.agents[agent].id.clone();
        match t {
            ecall::Type::Subscribe => self.executor_subscribe(
                agent,
                &fw,
                &eid,
                call.subscribe.unwrap_or_default(),
                accept,
            ),
            ecall::Type::Update => {
                if let Some(u) = call.update {
                    let mut status = u.status;
                    if status.agent_id.is_none() {
                        status.agent_id = Some(AgentID {
                            value: agent_id.into(),
                        });
                    }
                    self.agent_update(agent, &fw, status, true);
                }
                Response::new(202).into()
            }
            ecall::Type::Message => {
                // Not kept by the agent: lost while it is cut off from the master.
                let reaches = self.agents[agent].up;
                if let Some(m) = call.message.filter(|_| reaches) {
                    let mut ev = sched_event(event::Type::Message);
                    ev.message = Some(event::Message {
                        agent_id: AgentID {
                            value: agent_id.into(),
                        },
                        executor_id: ExecutorID { value: eid.into() },
                        data: m.data,
                    });
                    self.send(&fw, &ev);
                }
                Response::new(202).into()
            }
            _ => Response::new(501).into(),
        }
    }

    fn executor_subscribe(
        &mut self,
        agent: usize,
        fw: &str,
        eid: &str,
        subscribe: ecall::Subscribe,
        accept: Encoding,
    ) -> Reply {
        let (tx, rx) = crossbeam_channel::unbounded();
        let key = self.next_key();
        let reply = {
            let tx_cmd = self.tx.clone();
            Reply::Stream(Stream {
                headers: vec![("Content-Type".into(), accept.content_type().into())],
                rx,
                on_end: Box::new(move || {
                    let _ = tx_cmd.send(Cmd::ExecutorStreamEnded { agent, key });
                }),
            })
        };
        let a = &self.agents[agent];
        let agent_info = AgentInfo {
            hostname: a.hostname.as_str().into(),
            port: Some(i32::from(a.port)),
            resources: a
                .total
                .to_proto("*")
                .into_iter()
                .map(|mut r| {
                    r.allocation_info = None;
                    r
                })
                .collect(),
            attributes: a.attributes.clone(),
            id: Some(AgentID {
                value: a.id.as_str().into(),
            }),
            domain: None,
        };
        let agent_id = a.id.clone();
        let Some(af) = self.agents[agent].frameworks.get_mut(fw) else {
            return Response::text(400, "Framework cannot be found").into();
        };
        let terminating = af.terminating;
        let framework_info = af.info.clone();
        let Some(e) = af.executors.get_mut(eid) else {
            return Response::text(400, "Executor cannot be found").into();
        };
        if terminating || matches!(e.state, ExecState::Terminating | ExecState::Terminated) {
            let _ = tx.send(frame(accept, &exec_event(eevent::Type::Shutdown)));
            let _ = tx.send(StreamMsg::Close);
            return reply;
        }
        if let Some(old) = e.conn.take() {
            let _ = old.tx.send(StreamMsg::Close);
        }
        e.state = ExecState::Running;
        e.recovering = false;
        let mut ev = exec_event(eevent::Type::Subscribed);
        ev.subscribed = Some(eevent::Subscribed {
            executor_info: e.info.clone(),
            framework_info,
            agent_info,
            container_id: Some(ContainerID {
                value: e.container_id.as_str().into(),
                parent: None,
            }),
        });
        let _ = tx.send(frame(accept, &ev));
        e.conn = Some(ExecConn {
            key,
            encoding: accept,
            tx,
        });
        let idle = e.queued.is_empty() && e.launched.values().all(|s| s.is_terminal());
        for u in subscribe.unacknowledged_updates {
            let mut status = u.status;
            if status.agent_id.is_none() {
                status.agent_id = Some(AgentID {
                    value: agent_id.as_str().into(),
                });
            }
            self.agent_update(agent, fw, status, true);
        }
        if idle {
            log::warn!("executor {eid} has no tasks to run: shutting it down");
            self.shutdown_executor(agent, fw, eid);
            return reply;
        }
        if let Some(e) = self.executor_mut(agent, fw, eid) {
            let queued: Vec<TaskInfo> = e.queued.drain(..).collect();
            for task in queued {
                e.launched
                    .insert(task.task_id.value.to_string(), TaskState::Staging);
                if let Some(conn) = &e.conn {
                    let mut ev = exec_event(eevent::Type::Launch);
                    ev.launch = Some(eevent::Launch { task });
                    let _ = conn.tx.send(frame(conn.encoding, &ev));
                }
            }
        }
        reply
    }

    pub(super) fn executor_stream_ended(&mut self, agent: usize, key: u64) {
        let Some(a) = self.agents.get_mut(agent) else {
            return;
        };
        for af in a.frameworks.values_mut() {
            for (eid, e) in af.executors.iter_mut() {
                if e.conn.as_ref().is_some_and(|c| c.key == key) {
                    log::info!("executor {eid} on agent-{} disconnected", agent + 1);
                    e.conn = None;
                }
            }
        }
    }

    // ---- faults ----

    pub(super) fn kill_executor_process(&mut self, agent: usize, eid: &str) -> Result<(), String> {
        let a = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        let e = a
            .frameworks
            .values()
            .find_map(|af| af.executors.get(eid))
            .ok_or_else(|| format!("{} has no executor {eid:?}", a.hostname))?;
        if a.synthetic {
            return self.synthetic_crash(agent, eid);
        }
        let pid = e
            .pid
            .ok_or_else(|| format!("executor {eid:?} on {} has no running process", a.hostname))?;
        process::signal_group(pid, SIGKILL);
        Ok(())
    }

    /// The agent goes down with its host: executors die, the master rescinds its offers and,
    /// after the removal timeout, reports its tasks unreachable.
    pub(super) fn stop_agent(&mut self, agent: usize) -> Result<(), String> {
        self.take_down(agent, false)
    }

    /// The agent process restarts on a host that stays up, as a real agent with its default
    /// `--recover=reconnect`: executors of checkpointing frameworks keep running and may
    /// subscribe again within `executor_reregistration_timeout`; the others die with it.
    pub(super) fn restart_agent(&mut self, agent: usize) -> Result<(), String> {
        self.take_down(agent, true)?;
        self.start_agent(agent)?;
        let generation = self.agents[agent].generation;
        let timeout = self.cfg.executor_reregistration_timeout;
        self.schedule(timeout, Timer::Reregistration { agent, generation });
        Ok(())
    }

    /// Recovered executors that did not subscribe in time are killed, as the agent does.
    pub(super) fn reregistration_timeout(&mut self, agent: usize, generation: u64) {
        let timeout = self.cfg.executor_reregistration_timeout;
        let Some(a) = self.agents.get_mut(agent) else {
            return;
        };
        if a.generation != generation || !a.up {
            return;
        }
        for af in a.frameworks.values_mut() {
            for (eid, e) in af.executors.iter_mut() {
                if !std::mem::take(&mut e.recovering) || e.conn.is_some() {
                    continue;
                }
                log::warn!(
                    "executor {eid} did not subscribe within {timeout:?} of the agent's restart: killing it"
                );
                e.state = ExecState::Terminating;
                e.pending_termination = Some((
                    TaskState::Failed,
                    task_status::Reason::ExecutorReregistrationTimeout,
                    format!(
                        "Executor did not re-register within {}",
                        mesos_duration(timeout)
                    ),
                ));
                if let Some(pid) = e.pid {
                    process::signal_group(pid, SIGKILL);
                }
            }
        }
    }

    pub(super) fn take_down(
        &mut self,
        agent: usize,
        keep_checkpointed: bool,
    ) -> Result<(), String> {
        let a = self
            .agents
            .get_mut(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        if a.partitioned {
            return Err(format!(
                "{} is cut off from the master: heal it first",
                a.hostname
            ));
        }
        if !a.up {
            return Err(format!("{} is already stopped", a.hostname));
        }
        log::info!("stopping {}", a.hostname);
        a.up = false;
        a.generation += 1;
        let generation = a.generation;
        if let Some(mut s) = a.server.take() {
            s.stop();
        }
        for af in a.frameworks.values_mut() {
            let checkpoint = af.info.checkpoint.unwrap_or(false);
            for e in af.executors.values_mut() {
                e.conn = None;
                let recover = keep_checkpointed
                    && checkpoint
                    && e.pid.is_some()
                    && matches!(e.state, ExecState::Running | ExecState::Registering);
                if recover {
                    e.recovering = true;
                    continue;
                }
                if e.state != ExecState::Terminated {
                    e.lost_with_agent = true;
                }
                // Still fetching: the process that appears later belongs to a dead agent.
                if e.state == ExecState::Launching {
                    e.state = ExecState::Terminating;
                }
                if let Some(pid) = e.pid {
                    process::signal_group(pid, SIGKILL);
                }
            }
        }
        self.rescind_offers_of(agent);
        let timeout = self.cfg.agent_removal_timeout;
        self.schedule(timeout, Timer::Unreachable { agent, generation });
        if self.agents[agent].synthetic {
            self.synthetic_executors_died(agent);
        }
        Ok(())
    }

    pub(super) fn start_agent(&mut self, agent: usize) -> Result<(), String> {
        let a = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        if a.up || a.partitioned {
            return Err(format!("{} is already running", a.hostname));
        }
        if a.removed {
            return Err(format!(
                "{}: its machine is down for maintenance: bring it up first",
                a.hostname
            ));
        }
        // A synthetic agent has no server to bring back.
        let server = if a.synthetic {
            None
        } else {
            let handler =
                super::endpoints::agent_handler(agent, self.tx.clone(), self.cfg.wire_tap.clone());
            let server = Server::bind(a.endpoint(), &a.hostname, handler.clone())
                .or_else(|_| Server::bind(SocketAddr::from((a.ip, 0)), &a.hostname, handler))
                .map_err(|e| format!("{}: cannot listen again: {e}", a.hostname))?;
            Some(server)
        };
        let a = &mut self.agents[agent];
        log::info!("{} is back", a.hostname);
        if let Some(server) = server {
            a.port = server.addr().port();
            a.server = Some(server);
        }
        a.up = true;
        a.unreachable = false;
        a.unreachable_time = None;
        a.rebooting_as = None;
        a.generation += 1;
        self.resend_pending(agent);
        self.allocate();
        Ok(())
    }

    /// An agent back in touch with the master sends its unacknowledged updates at once,
    /// with the retry interval starting over.
    pub(super) fn resend_pending(&mut self, agent: usize) {
        let retry = self.cfg.status_update_retry;
        let pending: Vec<(String, String)> = self.agents[agent]
            .streams
            .iter_mut()
            .filter(|(_, s)| !s.pending.is_empty())
            .map(|(k, s)| {
                s.interval = retry;
                k.clone()
            })
            .collect();
        for (fw, task) in pending {
            self.forward_head(agent, &fw, &task);
        }
    }

    pub(super) fn mark_unreachable(&mut self, agent: usize, generation: u64) {
        let a = &mut self.agents[agent];
        if a.up || a.generation != generation {
            return;
        }
        a.unreachable = true;
        let agent_id = a.id.clone();
        // The master removes the agent: its offers are rescinded, the allocator drops its
        // filters (a stopped agent's offers went when it stopped).
        self.agent_removed_from_allocation(agent);
        let a = &mut self.agents[agent];
        let message = format!(
            "Agent {} is unreachable: health check timed out",
            a.hostname
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        a.unreachable_time = Some(TimeInfo { nanoseconds: nanos });
        let mut updates = Vec::new();
        for fw in self.frameworks.values_mut() {
            let pa = fw.partition_aware();
            let ids: Vec<String> = fw
                .tasks
                .iter()
                .filter(|(_, t)| t.agent == agent && !t.state.is_terminal())
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                let state = if pa {
                    TaskState::Unreachable
                } else {
                    TaskState::Lost
                };
                let Some(t) = fw.tasks.get_mut(&id) else {
                    continue;
                };
                let mut s = make_status(
                    &id,
                    state,
                    task_status::Source::Master,
                    Some(task_status::Reason::AgentRemoved),
                    &message,
                    Some(&agent_id),
                    t.executor_id.as_deref(),
                    None,
                );
                s.unreachable_time = Some(TimeInfo { nanoseconds: nanos });
                t.state = state;
                t.statuses.push(s.clone());
                if !pa {
                    if let Some(t) = fw.tasks.remove(&id) {
                        fw.completed_tasks.push_back(t);
                    }
                }
                updates.push((fw.id.clone(), s));
            }
        }
        for (fw, s) in updates {
            self.send_update(&fw, s);
        }
        let ids: Vec<String> = self.frameworks.keys().cloned().collect();
        for fw in ids {
            let mut ev = sched_event(event::Type::Failure);
            ev.failure = Some(event::Failure {
                agent_id: Some(AgentID {
                    value: agent_id.as_str().into(),
                }),
                executor_id: None,
                status: None,
            });
            self.send(&fw, &ev);
        }
    }

    pub(super) fn agent_state_json(&self, agent: usize) -> Value {
        let Some(a) = self.agents.get(agent) else {
            return json!({});
        };
        let frameworks: Vec<Value> = a
            .frameworks
            .iter()
            .map(|(fid, af)| {
                json!({
                    "id": fid,
                    "name": af.info.name,
                    "checkpoint": af.info.checkpoint.unwrap_or(false),
                    "executors": af.executors.iter().filter(|(_, e)| e.state != ExecState::Terminated)
                        .map(|(eid, e)| json!({
                            "id": eid,
                            "name": e.info.name,
                            "source": e.info.source,
                            "container": e.container_id,
                            "directory": e.directory,
                            "resources": e.resources.to_json(),
                            "queued_tasks": e.queued.iter().map(|t| json!({
                                "id": t.task_id.value, "name": t.name,
                            })).collect::<Vec<_>>(),
                            "tasks": e.launched.iter().map(|(t, s)| json!({
                                "id": t, "state": state_name(*s),
                            })).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "version": self.cfg.version,
            "id": a.id,
            "pid": a.pid(),
            "hostname": a.hostname,
            "resources": a.total.to_json(),
            "attributes": attributes_json(&a.attributes),
            "master_hostname": self.masters[self.leader].addr.ip().to_string(),
            "frameworks": frameworks,
            "flags": {
                "work_dir": a.work_dir,
                "executor_registration_timeout":
                    mesos_duration(self.cfg.executor_registration_timeout),
                "executor_shutdown_grace_period":
                    mesos_duration(self.cfg.executor_shutdown_grace_period),
                "recovery_timeout": mesos_duration(self.cfg.recovery_timeout),
                "executor_reregistration_timeout":
                    mesos_duration(self.cfg.executor_reregistration_timeout),
            },
        })
    }
}

/// The task's executor, or for a command task the command executor the agent makes up for it
/// (with the task id to name it by).
pub(super) fn executor_of(task: &TaskInfo, fw_id: &str) -> (ExecutorInfo, Option<String>) {
    let task_id = task.task_id.value.to_string();
    match &task.executor {
        Some(e) => (e.clone(), None),
        None => {
            let command = task.command.clone().unwrap_or_default();
            let info = ExecutorInfo {
                executor_id: ExecutorID {
                    value: task_id.as_str().into(),
                },
                framework_id: Some(FrameworkID {
                    value: fw_id.into(),
                }),
                name: Some(
                    format!(
                        "Command Executor (Task: {task_id}) (Command: sh -c '{}')",
                        command.value.as_deref().unwrap_or("")
                    )
                    .into(),
                ),
                source: Some(task_id.as_str().into()),
                command: Some(command),
                ..Default::default()
            };
            (info, Some(task_id))
        }
    }
}

/// How the command executor reports its command's end.
fn command_outcome(
    status: i32,
    description: &str,
    killed: bool,
) -> (
    TaskState,
    task_status::Source,
    Option<task_status::Reason>,
    String,
) {
    let exited_ok = status == 0;
    let message = format!("Command {description}");
    let state = if killed {
        TaskState::Killed
    } else if exited_ok {
        TaskState::Finished
    } else {
        TaskState::Failed
    };
    (state, task_status::Source::Executor, None, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_typed_like_the_agent_flag() {
        let a = parse_attribute("rack", "r1");
        assert_eq!(a.r#type, value::Type::Text);
        assert_eq!(a.text.unwrap().value, "r1");
        assert_eq!(parse_attribute("n", "2").r#type, value::Type::Scalar);
        assert_eq!(parse_attribute("d", "d1,d2").r#type, value::Type::Text);
        assert_eq!(
            parse_attribute("dev", "/dev/xvdf").r#type,
            value::Type::Text
        );
        assert_eq!(
            parse_attribute("p", "[1-2,5-9]").r#type,
            value::Type::Ranges
        );
        assert_eq!(parse_attribute("s", "{a,b}").r#type, value::Type::Set);
        assert_eq!(parse_attribute("v", "1.0.2").r#type, value::Type::Text);
    }
}
