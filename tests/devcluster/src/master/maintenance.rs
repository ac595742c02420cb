//! Mesos maintenance primitives (`docs/maintenance.md`, `src/master/maintenance.cpp`), as a
//! 1.4 master has them:
//!
//! - `POST /master/maintenance/schedule` replaces the schedule: windows of `machine_ids`
//!   (`hostname` and `ip`, as the agent on that machine registers them) and an
//!   `unavailability`. Machines in it are `DRAINING`; a `DOWN` machine may not leave it.
//!   `GET` returns it.
//! - While a machine drains, every framework with tasks or executors on its agent gets an
//!   inverse offer (INVERSE_OFFERS) at allocation, and again once its answer's refuse filter
//!   (default 5 s) expires; offers of the agent carry the `unavailability`. The answers
//!   (ACCEPT_INVERSE_OFFERS / DECLINE_INVERSE_OFFERS) show in `GET /master/maintenance/status`.
//! - `POST /master/machine/down` (a list of machine ids, each `DRAINING`) removes the agents
//!   of those machines: their tasks end as for a removed agent, their executors are killed,
//!   and they may not register while the machine is `DOWN`. `POST /master/machine/up` (each
//!   `DOWN`) takes the machines out of the schedule; their agents register again, with new
//!   ids, as an agent whose master shut it down does.
//!
//! Bad requests get 400 with the master's message.

use super::state::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use storage_framework::mesos::scheduler::event;
use storage_framework::mesos::types::*;
use storage_framework::message;

message! {
    Window = "mesos.maintenance.Window" {
        rep 1 machine_ids: MachineID,
        req 2 unavailability: Unavailability,
    }
}
message! { Schedule = "mesos.maintenance.Schedule" { rep 1 windows: Window } }

/// A machine as the master keys it: the hostname lower-cased, the IP as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct MachineKey {
    hostname: Option<String>,
    ip: Option<String>,
}

impl MachineKey {
    fn of(id: &MachineID) -> MachineKey {
        MachineKey {
            hostname: id.hostname.as_deref().map(str::to_ascii_lowercase),
            ip: id.ip.as_deref().map(str::to_string),
        }
    }

    /// The id an agent's machine has: its hostname and the IP it registered from.
    fn of_agent(a: &Agent) -> MachineKey {
        MachineKey {
            hostname: Some(a.hostname.to_ascii_lowercase()),
            ip: Some(a.ip.to_string()),
        }
    }

    fn json(&self) -> Value {
        let mut v = serde_json::Map::new();
        if let Some(h) = &self.hostname {
            v.insert("hostname".into(), json!(h));
        }
        if let Some(ip) = &self.ip {
            v.insert("ip".into(), json!(ip));
        }
        Value::Object(v)
    }

    /// `'{"hostname":"h","ip":"1.2.3.4"}'`, as the master's messages quote a machine.
    fn quoted(&self) -> String {
        format!("'{}'", self.json())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Draining,
    Down,
}

struct Machine {
    mode: Mode,
    unavailability: Unavailability,
    /// Per framework: accepted or not, and when it answered.
    statuses: BTreeMap<String, (bool, TimeInfo)>,
}

/// The maintenance part of the master's state.
#[derive(Default)]
pub(super) struct Maintenance {
    schedule: Vec<Window>,
    machines: BTreeMap<MachineKey, Machine>,
    /// Inverse offers not answered yet: id -> (framework, agent index).
    outstanding: BTreeMap<String, (String, usize)>,
    /// No inverse offer to a framework for an agent before this.
    filters: BTreeMap<(String, usize), Instant>,
}

/// One of the operator's maintenance requests, for the master's owner thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaintenanceCall {
    GetSchedule,
    PostSchedule,
    Status,
    Down,
    Up,
}

impl MaintenanceCall {
    /// The call a request for `path` (under `/master`) and `method` makes, or the response
    /// that refuses its method; `None` for other paths.
    pub(super) fn route(path: &str, method: &str) -> Option<Result<MaintenanceCall, String>> {
        let (allowed, call): (&[&str], _) = match (path, method) {
            ("/maintenance/schedule", "GET") => (&[], MaintenanceCall::GetSchedule),
            ("/maintenance/schedule", "POST") => (&[], MaintenanceCall::PostSchedule),
            ("/maintenance/schedule", _) => (&["GET", "POST"], MaintenanceCall::GetSchedule),
            ("/maintenance/status", "GET") => (&[], MaintenanceCall::Status),
            ("/maintenance/status", _) => (&["GET"], MaintenanceCall::Status),
            ("/machine/down", "POST") => (&[], MaintenanceCall::Down),
            ("/machine/up", "POST") => (&[], MaintenanceCall::Up),
            ("/machine/down" | "/machine/up", _) => (&["POST"], MaintenanceCall::Up),
            _ => return None,
        };
        if allowed.is_empty() {
            return Some(Ok(call));
        }
        let list = allowed
            .iter()
            .map(|m| format!("'{m}'"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(Err(format!(
            "Expecting one of {{ {list} }}, but received '{method}'"
        )))
    }
}

fn validate_machine(id: &MachineID) -> Result<(), String> {
    if id.hostname.is_none() && id.ip.is_none() {
        return Err("Both 'hostname' and 'ip' for a machine are empty".into());
    }
    if let Some(ip) = &id.ip {
        if ip.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(format!("Failed to parse IP '{ip}'"));
        }
    }
    Ok(())
}

fn validate_unavailability(u: &Unavailability) -> Result<(), String> {
    if u.start.nanoseconds < 0 {
        return Err("Unavailability 'start' is negative".into());
    }
    if u.duration.as_ref().is_some_and(|d| d.nanoseconds < 0) {
        return Err("Unavailability 'duration' is negative".into());
    }
    Ok(())
}

/// A list of machines for `machine/down` and `machine/up`: not empty, each valid, none twice.
fn validate_machines(ids: &[MachineID]) -> Result<Vec<MachineKey>, String> {
    if ids.is_empty() {
        return Err("List of machines is empty".into());
    }
    let mut keys: Vec<MachineKey> = Vec::new();
    for id in ids {
        validate_machine(id)?;
        let key = MachineKey::of(id);
        if keys.contains(&key) {
            return Err(format!(
                "Machine {} appears more than once in the schedule",
                key.quoted()
            ));
        }
        keys.push(key);
    }
    Ok(keys)
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("Failed to parse JSON: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("Failed to convert JSON into {what}: {e}"))
}

fn now_time() -> TimeInfo {
    TimeInfo {
        nanoseconds: (now_secs() * 1e9) as i64,
    }
}

impl Cluster {
    /// An operator's maintenance request: `Ok` the JSON body of a 200 (`None`: empty), `Err`
    /// the message of a 400.
    pub(super) fn maintenance_call(
        &mut self,
        call: MaintenanceCall,
        body: &[u8],
    ) -> Result<Option<Value>, String> {
        match call {
            MaintenanceCall::GetSchedule => {
                let schedule = Schedule {
                    windows: self.maintenance.schedule.clone(),
                };
                Ok(Some(
                    serde_json::to_value(&schedule).map_err(|e| e.to_string())?,
                ))
            }
            MaintenanceCall::Status => Ok(Some(self.maintenance_status())),
            MaintenanceCall::PostSchedule => {
                let schedule: Schedule = parse_json(body, "a Schedule protobuf")?;
                self.update_schedule(schedule).map(|()| None)
            }
            MaintenanceCall::Down | MaintenanceCall::Up => {
                let ids: Vec<MachineID> = parse_json(body, "a list of MachineID protobufs")?;
                let keys = validate_machines(&ids)?;
                let want = if call == MaintenanceCall::Down {
                    Mode::Draining
                } else {
                    Mode::Down
                };
                for key in &keys {
                    let Some(m) = self.maintenance.machines.get(key) else {
                        return Err(format!(
                            "Machine {} is not part of a maintenance schedule",
                            key.quoted()
                        ));
                    };
                    if m.mode != want {
                        return Err(match want {
                            Mode::Draining => format!(
                                "Machine {} is not in DRAINING mode and cannot be brought down",
                                key.quoted()
                            ),
                            Mode::Down => format!(
                                "Machine {} is not in DOWN mode and cannot be brought up",
                                key.quoted()
                            ),
                        });
                    }
                }
                for key in keys {
                    match want {
                        Mode::Draining => self.machine_down(key),
                        Mode::Down => self.machine_up(key),
                    }
                }
                Ok(None)
            }
        }
    }

    fn update_schedule(&mut self, schedule: Schedule) -> Result<(), String> {
        let mut updated: BTreeMap<MachineKey, Unavailability> = BTreeMap::new();
        for window in &schedule.windows {
            if window.machine_ids.is_empty() {
                return Err("List of machines in the maintenance window is empty".into());
            }
            validate_unavailability(&window.unavailability)?;
            for id in &window.machine_ids {
                validate_machine(id)?;
                let key = MachineKey::of(id);
                if updated.contains_key(&key) {
                    return Err(format!(
                        "Machine {} appears more than once in the schedule",
                        key.quoted()
                    ));
                }
                updated.insert(key, window.unavailability.clone());
            }
        }
        for (key, m) in &self.maintenance.machines {
            if m.mode == Mode::Down && !updated.contains_key(key) {
                return Err(format!(
                    "Machine {} is deactivated and cannot be removed from the schedule",
                    key.quoted()
                ));
            }
        }
        let left: Vec<MachineKey> = self
            .maintenance
            .machines
            .keys()
            .filter(|k| !updated.contains_key(*k))
            .cloned()
            .collect();
        for key in left {
            log::info!("machine {} is up: out of the schedule", key.json());
            self.maintenance.machines.remove(&key);
            self.rescind_inverse_offers_on(&key);
        }
        for (key, unavailability) in updated {
            let m = self
                .maintenance
                .machines
                .entry(key.clone())
                .or_insert_with(|| Machine {
                    mode: Mode::Draining,
                    unavailability: unavailability.clone(),
                    statuses: BTreeMap::new(),
                });
            if m.unavailability != unavailability {
                // A new window asks again: the earlier answers were about another one.
                m.unavailability = unavailability;
                m.statuses.clear();
            }
        }
        self.maintenance.schedule = schedule.windows;
        self.allocate();
        Ok(())
    }

    fn maintenance_status(&self) -> Value {
        let mut draining = Vec::new();
        let mut down = Vec::new();
        for (key, m) in &self.maintenance.machines {
            if m.mode == Mode::Down {
                down.push(key.json());
                continue;
            }
            let statuses: Vec<Value> = m
                .statuses
                .iter()
                .map(|(fw, (accepted, at))| {
                    json!({
                        "status": if *accepted { "ACCEPT" } else { "DECLINE" },
                        "framework_id": {"value": fw},
                        "timestamp": {"nanoseconds": at.nanoseconds},
                    })
                })
                .collect();
            let mut d = json!({ "id": key.json() });
            if !statuses.is_empty() {
                d["statuses"] = Value::Array(statuses);
            }
            draining.push(d);
        }
        // Like the master's JSON of a protobuf: empty repeated fields are left out.
        let mut v = json!({});
        if !draining.is_empty() {
            v["draining_machines"] = Value::Array(draining);
        }
        if !down.is_empty() {
            v["down_machines"] = Value::Array(down);
        }
        v
    }

    fn agents_on(&self, key: &MachineKey) -> Vec<usize> {
        (0..self.agents.len())
            .filter(|&i| MachineKey::of_agent(&self.agents[i]) == *key)
            .collect()
    }

    fn machine_down(&mut self, key: MachineKey) {
        if let Some(m) = self.maintenance.machines.get_mut(&key) {
            m.mode = Mode::Down;
        }
        self.rescind_inverse_offers_on(&key);
        for agent in self.agents_on(&key) {
            if self.agents[agent].removed {
                continue;
            }
            let host = self.agents[agent].hostname.clone();
            let old_id = self.agents[agent].id.clone();
            log::info!("{host}: machine down for maintenance; agent {old_id} is removed");
            if self.agents[agent].up {
                if let Err(e) = self.take_down(agent, false) {
                    log::warn!("{host}: {e}");
                }
            }
            // Removed, not unreachable: the unreachable timer of the stop is void.
            self.agents[agent].generation += 1;
            self.agents[agent].removed = true;
            self.forget_executors(agent);
            self.agent_removed_from_allocation(agent);
            let message = format!("Agent {host} removed: Operator initiated 'Machine DOWN'");
            self.end_tasks_of_removed_agent(agent, &old_id, &message);
            self.tasks_keep_their_agent(agent, &old_id);
        }
    }

    fn machine_up(&mut self, key: MachineKey) {
        self.maintenance.machines.remove(&key);
        for w in &mut self.maintenance.schedule {
            w.machine_ids.retain(|id| MachineKey::of(id) != key);
        }
        self.maintenance
            .schedule
            .retain(|w| !w.machine_ids.is_empty());
        for agent in self.agents_on(&key) {
            if !self.agents[agent].removed {
                continue;
            }
            // The agent the master shut down starts afresh: a new id.
            let new_id = self.fresh_agent_id();
            let a = &mut self.agents[agent];
            log::info!(
                "{}: machine up; its agent registers as {new_id} (was {})",
                a.hostname,
                a.id
            );
            a.removed = false;
            a.id = new_id;
            a.registered_time = now_secs();
            if let Err(e) = self.start_agent(agent) {
                log::warn!("{}: cannot start: {e}", self.agents[agent].hostname);
            }
        }
    }

    /// When agent `agent`'s machine is scheduled for maintenance: what its offers carry.
    pub(super) fn unavailability_of(&self, agent: usize) -> Option<Unavailability> {
        if self.maintenance.machines.is_empty() {
            return None;
        }
        let key = MachineKey::of_agent(&self.agents[agent]);
        let m = self.maintenance.machines.get(&key)?;
        Some(m.unavailability.clone())
    }

    /// At allocation: an inverse offer to each active framework with resources on an agent
    /// of a draining machine, unless one is outstanding or its answer's filter holds.
    pub(super) fn send_inverse_offers(&mut self) {
        if self.maintenance.machines.is_empty() {
            return;
        }
        let now = Instant::now();
        self.maintenance.filters.retain(|_, until| *until > now);
        let mut batches: BTreeMap<String, Vec<InverseOffer>> = BTreeMap::new();
        for agent in 0..self.agents.len() {
            let a = &self.agents[agent];
            if !a.up {
                continue;
            }
            let Some(m) = self.maintenance.machines.get(&MachineKey::of_agent(a)) else {
                continue;
            };
            if m.mode != Mode::Draining {
                continue;
            }
            let unavailability = m.unavailability.clone();
            for fw_id in self.frameworks_using(agent) {
                let pending = self
                    .maintenance
                    .outstanding
                    .values()
                    .any(|(f, g)| *f == fw_id && *g == agent);
                let filtered = self
                    .maintenance
                    .filters
                    .contains_key(&(fw_id.clone(), agent));
                if pending || filtered {
                    continue;
                }
                let id = format!("{}-O{}", self.master_id(), self.next_offer);
                self.next_offer += 1;
                let a = &self.agents[agent];
                batches
                    .entry(fw_id.clone())
                    .or_default()
                    .push(InverseOffer {
                        id: OfferID {
                            value: id.as_str().into(),
                        },
                        url: None,
                        framework_id: FrameworkID {
                            value: fw_id.as_str().into(),
                        },
                        agent_id: Some(AgentID {
                            value: a.id.as_str().into(),
                        }),
                        unavailability: unavailability.clone(),
                    });
                self.maintenance.outstanding.insert(id, (fw_id, agent));
            }
        }
        for (fw_id, inverse_offers) in batches {
            let mut ev = sched_event(event::Type::InverseOffers);
            ev.inverse_offers = Some(event::InverseOffers { inverse_offers });
            self.send(&fw_id, &ev);
        }
    }

    /// Active, connected frameworks with resources on `agent`: a live task or executor, or an
    /// outstanding offer.
    fn frameworks_using(&self, agent: usize) -> Vec<String> {
        let a = &self.agents[agent];
        self.frameworks
            .values()
            .filter(|f| f.active && f.conn.is_some())
            .filter(|f| {
                let tasks = f
                    .tasks
                    .values()
                    .any(|t| t.agent == agent && !t.state.is_terminal());
                let executors = a.frameworks.get(&f.id).is_some_and(|af| {
                    af.executors
                        .values()
                        .any(|e| e.state != ExecState::Terminated)
                });
                let offered = self
                    .offers
                    .values()
                    .any(|o| o.agent == agent && o.framework == f.id);
                tasks || executors || offered
            })
            .map(|f| f.id.clone())
            .collect()
    }

    /// ACCEPT_INVERSE_OFFERS or DECLINE_INVERSE_OFFERS: each valid id's answer is recorded
    /// and its refuse filter set; unknown ids are logged and skipped, as the master does.
    pub(super) fn answer_inverse_offers(
        &mut self,
        fw_id: &str,
        ids: &[OfferID],
        filters: Option<&Filters>,
        accept: bool,
    ) {
        let verb = if accept { "accepted" } else { "declined" };
        let refuse = filters
            .and_then(|f| f.refuse_seconds)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(5.0)
            .min(365.0 * 86400.0);
        for id in ids {
            let valid = self
                .maintenance
                .outstanding
                .get(id.value.as_str())
                .is_some_and(|(f, _)| f == fw_id);
            if !valid {
                log::warn!(
                    "framework {fw_id} {verb} unknown inverse offer {}",
                    id.value
                );
                continue;
            }
            let Some((_, agent)) = self.maintenance.outstanding.remove(id.value.as_str()) else {
                continue;
            };
            let key = MachineKey::of_agent(&self.agents[agent]);
            log::info!(
                "framework {fw_id} {verb} inverse offer {} for {}",
                id.value,
                self.agents[agent].hostname
            );
            if let Some(m) = self.maintenance.machines.get_mut(&key) {
                m.statuses.insert(fw_id.to_string(), (accept, now_time()));
            }
            if let Some(until) = Instant::now().checked_add(Duration::from_secs_f64(refuse)) {
                self.maintenance
                    .filters
                    .insert((fw_id.to_string(), agent), until);
                self.allocate_at(until);
            }
        }
    }

    /// The outstanding inverse offers for agents of machine `key` are withdrawn
    /// (RESCIND_INVERSE_OFFER to their frameworks).
    fn rescind_inverse_offers_on(&mut self, key: &MachineKey) {
        let agents = self.agents_on(key);
        self.rescind_inverse_offers_of(&agents);
    }

    /// The outstanding inverse offers for `agents` are withdrawn, as when the master removes
    /// an agent.
    pub(super) fn rescind_inverse_offers_of(&mut self, agents: &[usize]) {
        let gone: Vec<(String, String)> = self
            .maintenance
            .outstanding
            .iter()
            .filter(|(_, (_, a))| agents.contains(a))
            .map(|(id, (f, _))| (id.clone(), f.clone()))
            .collect();
        for (id, fw) in gone {
            self.maintenance.outstanding.remove(&id);
            let mut ev = sched_event(event::Type::RescindInverseOffer);
            ev.rescind_inverse_offer = Some(event::RescindInverseOffer {
                inverse_offer_id: OfferID {
                    value: id.as_str().into(),
                },
            });
            self.send(&fw, &ev);
        }
    }

    /// A new leader knows the schedule (from the registry) but no inverse offer.
    pub(super) fn forget_all_inverse_offers(&mut self) {
        self.maintenance.outstanding.clear();
    }

    /// A framework that leaves takes its outstanding inverse offers with it.
    pub(super) fn forget_inverse_offers_of(&mut self, fw_id: &str) {
        self.maintenance.outstanding.retain(|_, (f, _)| f != fw_id);
    }
}
