//! Placement as pure functions: which persona an agent gets, what its attributes declare,
//! whether an offer can hold the executor, and what to answer to each offer.
//! No I/O here: the dispatcher feeds offers and the model in and sends what comes out.

pub mod launch;

use crate::contract::ids;
use crate::mesos::types::{value, Attribute, Offer, Resource};
use crate::scheduler::model::{ClusterModel, Layout, Persona};
use std::collections::BTreeMap;

/// Slice of the launch that the task itself holds; the rest goes to the executor.
pub const TASK_CPUS: f64 = 0.05;
pub const TASK_MEM: f64 = 16.0;

/// Refuse offers of agents that are already covered for this long: REVIVE clears the filter
/// when one of them needs us again.
pub const REFUSE_COVERED_SECS: f64 = 3600.0;
/// An agent without room now may have room soon.
pub const REFUSE_NO_ROOM_SECS: f64 = 60.0;

/// The settings placement needs (taken from the flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub experimental: bool,
    pub cpu_mdm: f64,
    pub cpu_non: f64,
    pub mem_mdm: f64,
    pub mem_non: f64,
    pub cpu_factor: f64,
    pub mem_factor: f64,
}

impl Settings {
    /// Total cpus and mem (task + executor) a node of this persona needs.
    pub fn needs(&self, persona: Persona) -> (f64, f64) {
        if persona.is_mdm() {
            (
                self.cpu_mdm * self.cpu_factor,
                self.mem_mdm * self.mem_factor,
            )
        } else {
            (
                self.cpu_non * self.cpu_factor,
                self.mem_non * self.mem_factor,
            )
        }
    }
}

/// What to answer to one offer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Launch {
        persona: Persona,
        layout: Layout,
        /// Resources for the task and for the executor, carved out of the offer's own
        /// entries so that roles and reservations are exactly those offered.
        task_resources: Vec<Resource>,
        executor_resources: Vec<Resource>,
    },
    Decline {
        reason: String,
        refuse_seconds: f64,
    },
}

fn attr_text(a: &Attribute) -> Option<String> {
    match a.r#type {
        value::Type::Text => a.text.as_ref().map(|t| t.value.to_string()),
        value::Type::Scalar => a.scalar.as_ref().map(|s| s.value.to_string()),
        value::Type::Set => a.set.as_ref().map(|s| {
            s.item
                .iter()
                .map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(",")
        }),
        _ => None,
    }
}

/// Attribute names with the `scaleio-` alias folded into `storage-`.
fn attributes(attrs: &[Attribute]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for a in attrs {
        let Some(v) = attr_text(a) else { continue };
        let name = match a.name.strip_prefix("scaleio-") {
            Some(rest) => format!("storage-{rest}"),
            None => a.name.to_string(),
        };
        // The `storage-` spelling wins over its alias when both are present.
        if a.name.starts_with("scaleio-") && out.contains_key(&name) {
            continue;
        }
        out.insert(name, v);
    }
    out
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses the imperative attributes of design section 3. An attribute set that names a
/// domain but not its pools (or a pool but not its devices) is an error naming the missing
/// attribute: a half-declared layout must not silently fall back to discovery.
pub fn parse_layout(attrs: &[Attribute]) -> Result<(Layout, Option<Persona>), String> {
    let a = attributes(attrs);
    let persona = match a.get("storage-persona") {
        Some(p) => Some(
            Persona::parse(p).ok_or_else(|| format!("attribute storage-persona: unknown persona {p:?} (primary, secondary, tiebreaker or data)"))?,
        ),
        None => None,
    };
    let mut layout = Layout::default();
    if let Some(domains) = a.get("storage-sds-domains") {
        for d in list(domains) {
            let pools = a
                .get(&format!("storage-sds-{d}"))
                .ok_or_else(|| format!("attribute storage-sds-{d} missing: pools of domain {d} (named in storage-sds-domains)"))?;
            let mut by_pool = BTreeMap::new();
            for p in list(pools) {
                let devices = a
                    .get(&format!("storage-sds-{p}"))
                    .ok_or_else(|| format!("attribute storage-sds-{p} missing: devices of pool {p} (named in storage-sds-{d})"))?;
                let devs = list(devices);
                if let Some(bad) = devs.iter().find(|d| !d.starts_with("/dev/")) {
                    return Err(format!(
                        "attribute storage-sds-{p}: {bad:?} is not a device path under /dev/"
                    ));
                }
                by_pool.insert(p, devs);
            }
            layout.sds.insert(d, by_pool);
        }
    }
    if let Some(domains) = a.get("storage-sdc-domains") {
        for d in list(domains) {
            let pools = a
                .get(&format!("storage-sdc-{d}"))
                .ok_or_else(|| format!("attribute storage-sdc-{d} missing: pools of domain {d} (named in storage-sdc-domains)"))?;
            layout.sdc.insert(d, list(pools));
        }
    }
    Ok((layout, persona))
}

/// Sum of the unreserved-or-ours scalar `name` in `resources`.
pub fn scalar_total(resources: &[Resource], name: &str) -> f64 {
    resources
        .iter()
        .filter(|r| r.name == name && r.r#type == value::Type::Scalar)
        .filter_map(|r| r.scalar.as_ref().map(|s| s.value))
        .sum()
}

/// Carves `amount` of scalar `name` out of the offer's entries (each piece keeps its entry's
/// role and reservation). Returns the pieces and the leftover entries, or `None` when the
/// offer holds too little.
fn carve(resources: &mut [Resource], name: &str, amount: f64) -> Option<Vec<Resource>> {
    // Scalars in Mesos are fixed point with three decimals; compare with that tolerance.
    const EPS: f64 = 0.0005;
    if scalar_total(resources, name) + EPS < amount {
        return None;
    }
    let mut want = amount;
    let mut out = Vec::new();
    for r in resources
        .iter_mut()
        .filter(|r| r.name == name && r.r#type == value::Type::Scalar)
    {
        if want <= EPS {
            break;
        }
        let Some(have) = r.scalar.as_ref().map(|s| s.value) else {
            continue;
        };
        let take = want.min(have);
        if take <= 0.0 {
            continue;
        }
        let mut piece = r.clone();
        piece.scalar = Some(value::Scalar {
            value: round3(take),
        });
        r.scalar = Some(value::Scalar {
            value: round3(have - take),
        });
        want -= take;
        out.push(piece);
    }
    Some(out)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Task and executor resources for a node of `persona`, or why the offer is too small.
pub fn fit(
    offer: &Offer,
    settings: &Settings,
    persona: Persona,
) -> Result<(Vec<Resource>, Vec<Resource>), String> {
    let (cpus, mem) = settings.needs(persona);
    let mut pool = offer.resources.clone();
    let short = |what: &str, need: f64, have: f64| {
        format!(
            "offer from {} has {have:.3} {what}, a {persona} node needs {need:.3}",
            offer.hostname
        )
    };
    let have_cpus = scalar_total(&pool, "cpus");
    let have_mem = scalar_total(&pool, "mem");
    let task_cpus = TASK_CPUS.min(cpus / 2.0);
    let task_mem = TASK_MEM.min(mem / 2.0);
    let mut task =
        carve(&mut pool, "cpus", task_cpus).ok_or_else(|| short("cpus", cpus, have_cpus))?;
    task.extend(carve(&mut pool, "mem", task_mem).ok_or_else(|| short("mem", mem, have_mem))?);
    let mut exec = carve(&mut pool, "cpus", round3(cpus - task_cpus))
        .ok_or_else(|| short("cpus", cpus, have_cpus))?;
    exec.extend(
        carve(&mut pool, "mem", round3(mem - task_mem))
            .ok_or_else(|| short("mem", mem, have_mem))?,
    );
    // A launch wave holds 10,000 of these until their ACCEPTs are sent; grown by
    // push and extend they had room for twice the (176-byte) resources they hold.
    task.shrink_to_fit();
    exec.shrink_to_fit();
    Ok((task, exec))
}

fn room(offer: &Offer) -> (f64, f64) {
    (
        scalar_total(&offer.resources, "cpus"),
        scalar_total(&offer.resources, "mem"),
    )
}

/// Answers a batch of offers. MDM personas (experimental mode) go first to agents that pin
/// them by attribute, then to the offers with the most room that satisfy the MDM needs.
pub fn decide(
    model: &ClusterModel,
    offers: &[Offer],
    settings: &Settings,
    now_ms: u64,
) -> Vec<Decision> {
    let (mut decisions, candidates) = screen(model, offers, now_ms);
    let personas = assign_personas(model, offers, &candidates, settings);
    for (i, layout, _) in candidates {
        let persona = personas.get(&i).copied().unwrap_or(Persona::Data);
        decisions[i] = Some(match fit(&offers[i], settings, persona) {
            Ok((task_resources, executor_resources)) => Decision::Launch {
                persona,
                layout,
                task_resources,
                executor_resources,
            },
            Err(reason) => Decision::Decline {
                reason,
                refuse_seconds: REFUSE_NO_ROOM_SECS,
            },
        });
    }
    decisions
        .into_iter()
        .map(|d| {
            d.unwrap_or(Decision::Decline {
                reason: "no decision".into(),
                refuse_seconds: REFUSE_NO_ROOM_SECS,
            })
        })
        .collect()
}

/// What [`decide`] declines outright (covered agents, backoff, a second offer of an agent,
/// bad attributes), without fitting the rest: `None` where it might launch. For offers that
/// find the launch window full, which are declined either way.
pub fn screen_declines(
    model: &ClusterModel,
    offers: &[Offer],
    now_ms: u64,
) -> Vec<Option<Decision>> {
    screen(model, offers, now_ms).0
}

/// An offer that may get a launch: its index, the layout its attributes give, the persona
/// they pin.
type Candidate = (usize, Layout, Option<Persona>);

/// Why a launch on this agent waits for an operator: its node out of relaunches,
/// decommissioned or having its storage taken out, or (no node yet) the plan paused.
fn held_back(
    node: Option<&crate::scheduler::model::Node>,
    paused: bool,
    host: &str,
) -> Option<String> {
    match node {
        Some(n) if n.relaunch_stopped => Some(format!(
            "{host}: {} launches in a row failed; not relaunched until retried",
            n.failures
        )),
        Some(n) if n.decommissioned => Some(format!(
            "{host} is decommissioned (recommission it to launch it again)"
        )),
        Some(n) if !n.launchable() => Some(format!("{host} is having its storage taken out")),
        None if paused => Some(format!("{host}: the plan is paused; no new node starts")),
        _ => None,
    }
}

/// Declines what cannot be a launch (covered agents, relaunch backoff, a second offer of
/// one agent, unreadable attributes); the rest are candidates.
fn screen(
    model: &ClusterModel,
    offers: &[Offer],
    now_ms: u64,
) -> (Vec<Option<Decision>>, Vec<Candidate>) {
    let mut decisions: Vec<Option<Decision>> = vec![None; offers.len()];
    let mut candidates: Vec<Candidate> = Vec::new();
    // One launch per agent even if the batch holds two offers from it.
    let mut agents_in_batch = std::collections::BTreeSet::new();

    for (i, offer) in offers.iter().enumerate() {
        let agent = offer.agent_id.value.as_str();
        let node = model.nodes.get(agent);
        let decline = |reason: String, refuse: f64| Decision::Decline {
            reason,
            refuse_seconds: refuse,
        };
        if node.is_some_and(|n| n.covered())
            || offer
                .executor_ids
                .iter()
                .any(|e| ids::is_executor_id(&e.value))
        {
            decisions[i] = Some(decline(
                format!("{} already runs the storage executor", offer.hostname),
                REFUSE_COVERED_SECS,
            ));
            continue;
        }
        if let Some(why) = held_back(node, model.paused, &offer.hostname) {
            decisions[i] = Some(decline(why, REFUSE_COVERED_SECS));
            continue;
        }
        if let Some(until) = node.and_then(|n| n.retry_after_ms).filter(|t| *t > now_ms) {
            let secs = ((until - now_ms) as f64 / 1000.0).max(1.0);
            decisions[i] = Some(decline(
                format!("{} is in relaunch backoff for {secs:.0} s", offer.hostname),
                secs,
            ));
            continue;
        }
        if !agents_in_batch.insert(agent.to_owned()) {
            decisions[i] = Some(decline(
                format!("{}: another offer of this agent is used", offer.hostname),
                REFUSE_NO_ROOM_SECS,
            ));
            continue;
        }
        match parse_layout(&offer.attributes) {
            Ok((layout, pinned)) => candidates.push((i, layout, pinned)),
            Err(e) => {
                decisions[i] = Some(decline(
                    format!("{}: {e}", offer.hostname),
                    REFUSE_NO_ROOM_SECS,
                ))
            }
        }
    }
    (decisions, candidates)
}

/// Personas: a node keeps the persona it had; pinned attributes next; in experimental
/// mode the missing MDM roles go to the roomiest offers that can hold an MDM.
fn assign_personas(
    model: &ClusterModel,
    offers: &[Offer],
    candidates: &[Candidate],
    settings: &Settings,
) -> BTreeMap<usize, Persona> {
    let mut personas: BTreeMap<usize, Persona> = BTreeMap::new();
    let mut taken: Vec<Persona> = model
        .nodes
        .values()
        .filter(|n| n.persona.is_mdm())
        .map(|n| n.persona)
        .collect();
    for (i, _, pinned) in candidates {
        let known = model
            .nodes
            .get(offers[*i].agent_id.value.as_str())
            .map(|n| n.persona);
        let persona = match (known, pinned) {
            (Some(p), _) => Some(p),
            (None, Some(p)) if !settings.experimental => {
                // Pre-configured clusters have their MDMs already: every agent is a data node.
                let _ = p;
                Some(Persona::Data)
            }
            (None, Some(p)) if p.is_mdm() && taken.contains(p) => Some(Persona::Data),
            (None, Some(p)) => {
                taken.push(*p);
                Some(*p)
            }
            (None, None) if !settings.experimental => Some(Persona::Data),
            (None, None) => None,
        };
        if let Some(p) = persona {
            personas.insert(*i, p);
        }
    }
    if settings.experimental {
        let open: Vec<usize> = candidates
            .iter()
            .map(|(i, _, _)| *i)
            .filter(|i| !personas.contains_key(i))
            .collect();
        for (i, persona) in missing_mdms(offers, open, &mut taken, settings) {
            personas.insert(i, persona);
        }
    }
    personas
}

/// Experimental mode: the MDM roles not `taken` yet go to the roomiest of the `open` offers
/// that can hold an MDM; every other open offer is a data node.
fn missing_mdms(
    offers: &[Offer],
    mut open: Vec<usize>,
    taken: &mut Vec<Persona>,
    settings: &Settings,
) -> Vec<(usize, Persona)> {
    open.sort_by(|a, b| {
        let (ca, ma) = room(&offers[*a]);
        let (cb, mb) = room(&offers[*b]);
        (cb, mb)
            .partial_cmp(&(ca, ma))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut out = Vec::new();
    for i in open {
        let missing = [Persona::Primary, Persona::Secondary, Persona::Tiebreaker]
            .into_iter()
            .find(|p| !taken.contains(p));
        let persona = match missing {
            Some(p) if fit(&offers[i], settings, p).is_ok() => {
                taken.push(p);
                p
            }
            _ => Persona::Data,
        };
        out.push((i, persona));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::*;
    use crate::scheduler::model::{Node, TaskRecord};

    fn settings(experimental: bool) -> Settings {
        Settings {
            experimental,
            cpu_mdm: 1.5,
            cpu_non: 0.5,
            mem_mdm: 3072.0,
            mem_non: 512.0,
            cpu_factor: 1.0,
            mem_factor: 1.0,
        }
    }

    fn scalar(name: &str, v: f64, role: &str) -> Resource {
        Resource {
            name: name.into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: v }),
            role: Some(role.into()),
            ..Default::default()
        }
    }

    fn text(name: &str, v: &str) -> Attribute {
        Attribute {
            name: name.into(),
            r#type: value::Type::Text,
            text: Some(value::Text { value: v.into() }),
            ..Default::default()
        }
    }

    fn offer(agent: &str, cpus: f64, mem: f64, attrs: Vec<Attribute>) -> Offer {
        Offer {
            id: OfferID {
                value: format!("o-{agent}").into(),
            },
            framework_id: FrameworkID { value: "fw".into() },
            agent_id: AgentID {
                value: agent.into(),
            },
            hostname: format!("host-{agent}").into(),
            resources: vec![scalar("cpus", cpus, "*"), scalar("mem", mem, "*")],
            attributes: attrs,
            ..Default::default()
        }
    }

    fn node(agent: &str, persona: Persona, state: Option<&str>) -> Node {
        Node {
            task: state.map(|s| {
                TaskRecord::new(
                    &format!("t-{agent}"),
                    &format!("{}{agent}", crate::contract::ids::EXECUTOR_PREFIX),
                    crate::mesos::types::TaskState::from_name(s).unwrap(),
                    0,
                )
            }),
            ..Node::new(agent, &format!("host-{agent}"), persona, 0)
        }
    }

    #[test]
    fn layout_from_attributes_with_aliases() {
        let attrs = vec![
            text("scaleio-sds-domains", "pd1,pd2"),
            text("storage-sds-pd1", "p1"),
            text("storage-sds-pd2", "p2, p3"),
            text("storage-sds-p1", "/dev/xvdf,/dev/xvdg"),
            text("storage-sds-p2", "/dev/sdb"),
            text("scaleio-sds-p3", "/dev/sdc"),
            text("storage-sdc-domains", "pd1"),
            text("storage-sdc-pd1", "p1"),
            text("scaleio-persona", "secondary"),
        ];
        let (layout, persona) = parse_layout(&attrs).unwrap();
        assert_eq!(persona, Some(Persona::Secondary));
        assert_eq!(layout.sds["pd1"]["p1"], vec!["/dev/xvdf", "/dev/xvdg"]);
        assert_eq!(layout.sds["pd2"]["p3"], vec!["/dev/sdc"]);
        assert_eq!(layout.sdc["pd1"], vec!["p1"]);
        assert!(!layout.is_global());
        assert!(parse_layout(&[]).unwrap().0.is_global());
    }

    #[test]
    fn half_declared_layout_names_the_missing_attribute() {
        let err = parse_layout(&[text("storage-sds-domains", "pd1")]).unwrap_err();
        assert!(err.contains("storage-sds-pd1"), "{err}");
        let err = parse_layout(&[
            text("storage-sds-domains", "pd1"),
            text("storage-sds-pd1", "p1"),
        ])
        .unwrap_err();
        assert!(err.contains("storage-sds-p1"), "{err}");
        let err = parse_layout(&[
            text("storage-sds-domains", "pd1"),
            text("storage-sds-pd1", "p1"),
            text("storage-sds-p1", "sdb"),
        ])
        .unwrap_err();
        assert!(err.contains("/dev/"), "{err}");
        let err = parse_layout(&[text("storage-persona", "boss")]).unwrap_err();
        assert!(err.contains("boss"), "{err}");
    }

    #[test]
    fn preconfigured_mode_launches_data_nodes_only() {
        let offers = vec![
            offer("a1", 4.0, 8192.0, vec![text("storage-persona", "primary")]),
            offer("a2", 4.0, 8192.0, vec![]),
        ];
        let d = decide(&ClusterModel::default(), &offers, &settings(false), 0);
        for x in &d {
            match x {
                Decision::Launch { persona, .. } => assert_eq!(*persona, Persona::Data),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn launch_resources_add_up_and_keep_roles() {
        let mut o = offer("a1", 0.2, 100.0, vec![]);
        o.resources.push(scalar("cpus", 1.0, "storage"));
        o.resources.push(scalar("mem", 1000.0, "storage"));
        let (task, exec) = fit(&o, &settings(false), Persona::Data).unwrap();
        let total_cpu = scalar_total(&task, "cpus") + scalar_total(&exec, "cpus");
        let total_mem = scalar_total(&task, "mem") + scalar_total(&exec, "mem");
        assert!((total_cpu - 0.5).abs() < 1e-9, "{total_cpu}");
        assert!((total_mem - 512.0).abs() < 1e-9, "{total_mem}");
        // The first 0.2 cpus come from the unreserved entry, the rest from the role's.
        assert!(exec.iter().any(|r| r.role.as_deref() == Some("storage")));
        assert!(task.iter().all(|r| r.scalar.as_ref().unwrap().value > 0.0));
    }

    #[test]
    fn small_offers_are_declined_with_the_reason() {
        let d = decide(
            &ClusterModel::default(),
            &[offer("a1", 0.3, 8192.0, vec![])],
            &settings(false),
            0,
        );
        match &d[0] {
            Decision::Decline { reason, .. } => {
                assert!(
                    reason.contains("cpus") && reason.contains("host-a1"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn covered_agents_and_our_executors_are_declined() {
        let mut model = ClusterModel::default();
        model
            .nodes
            .insert("a1", node("a1", Persona::Data, Some("TASK_RUNNING")));
        let mut o2 = offer("a2", 4.0, 8192.0, vec![]);
        o2.executor_ids.push(ExecutorID {
            value: format!("{}old", crate::contract::ids::EXECUTOR_PREFIX).into(),
        });
        let d = decide(
            &model,
            &[offer("a1", 4.0, 8192.0, vec![]), o2],
            &settings(false),
            0,
        );
        for x in d {
            assert!(
                matches!(x, Decision::Decline { refuse_seconds, .. } if refuse_seconds == REFUSE_COVERED_SECS)
            );
        }
    }

    #[test]
    fn a_node_out_of_relaunches_and_new_nodes_of_a_paused_plan_are_declined() {
        let mut model = ClusterModel::default();
        let mut n = node("a1", Persona::Data, Some("TASK_FAILED"));
        n.relaunch_stopped = true;
        n.failures = 5;
        model.nodes.insert("a1", n);
        model
            .nodes
            .insert("a2", node("a2", Persona::Data, Some("TASK_FAILED")));
        model.paused = true;
        let offers = [
            offer("a1", 4.0, 8192.0, vec![]),
            offer("a2", 4.0, 8192.0, vec![]),
            offer("a3", 4.0, 8192.0, vec![]),
        ];
        let d = decide(&model, &offers, &settings(false), 0);
        let reason = |d: &Decision| match d {
            Decision::Decline { reason, .. } => reason.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            reason(&d[0]).contains("5 launches in a row failed"),
            "{d:?}"
        );
        assert!(
            matches!(&d[1], Decision::Launch { .. }),
            "a node relaunched while paused"
        );
        assert!(reason(&d[2]).contains("the plan is paused"), "{d:?}");
        model.paused = false;
        let d = decide(&model, &offers, &settings(false), 0);
        assert!(matches!(&d[2], Decision::Launch { .. }), "{d:?}");
    }

    #[test]
    fn backoff_declines_for_the_remaining_time() {
        let mut model = ClusterModel::default();
        let mut n = node("a1", Persona::Data, Some("TASK_FAILED"));
        n.retry_after_ms = Some(30_000);
        model.nodes.insert("a1", n);
        let d = decide(
            &model,
            &[offer("a1", 4.0, 8192.0, vec![])],
            &settings(false),
            10_000,
        );
        assert!(
            matches!(&d[0], Decision::Decline { refuse_seconds, .. } if *refuse_seconds == 20.0)
        );
        let d = decide(
            &model,
            &[offer("a1", 4.0, 8192.0, vec![])],
            &settings(false),
            30_001,
        );
        assert!(matches!(&d[0], Decision::Launch { .. }));
    }

    #[test]
    fn two_offers_from_one_agent_launch_once() {
        let d = decide(
            &ClusterModel::default(),
            &[
                offer("a1", 4.0, 8192.0, vec![]),
                offer("a1", 4.0, 8192.0, vec![]),
            ],
            &settings(false),
            0,
        );
        assert!(matches!(d[0], Decision::Launch { .. }));
        assert!(matches!(d[1], Decision::Decline { .. }));
    }

    #[test]
    fn experimental_mode_picks_pinned_then_roomiest_for_mdms() {
        let offers = vec![
            offer("small", 1.0, 1024.0, vec![]),
            offer("big", 16.0, 65536.0, vec![]),
            offer(
                "pinned",
                2.0,
                4096.0,
                vec![text("storage-persona", "tiebreaker")],
            ),
            offer("mid", 8.0, 16384.0, vec![]),
        ];
        let d = decide(&ClusterModel::default(), &offers, &settings(true), 0);
        let persona = |i: usize| match &d[i] {
            Decision::Launch { persona, .. } => *persona,
            other => panic!("{other:?}"),
        };
        assert_eq!(persona(2), Persona::Tiebreaker);
        assert_eq!(persona(1), Persona::Primary);
        assert_eq!(persona(3), Persona::Secondary);
        assert_eq!(persona(0), Persona::Data);

        // A node keeps its persona; the roles held are not handed out twice.
        let mut model = ClusterModel::default();
        model
            .nodes
            .insert("big", node("big", Persona::Primary, Some("TASK_FAILED")));
        let d = decide(&model, &offers, &settings(true), 0);
        let mut mdms: Vec<Persona> = d
            .iter()
            .filter_map(|x| match x {
                Decision::Launch { persona, .. } if persona.is_mdm() => Some(*persona),
                _ => None,
            })
            .collect();
        mdms.sort();
        assert_eq!(
            mdms,
            vec![Persona::Primary, Persona::Secondary, Persona::Tiebreaker]
        );
    }
}
