//! Experimental mode's MDM cluster build, as pure decisions (host-steps.md
//! sections 2 and 4): which addresses the trio has, when the primary may create the cluster,
//! the exact `scli` steps it runs, and when the secondary and tie-breaker may go on.
//!
//! The steps go into the primary's node plan; its executor runs them in order. Each step
//! names the state that shows it done (`check`), so a resumed executor skips what is done
//! instead of repeating a step that is not idempotent (cluster creation, password change,
//! standby add). No step carries a password: `stdin` names which password the executor
//! writes to the command's standard input (the factory one, `admin`, or the plan's secret).

pub use crate::contract::plan::{Check, ClusterInit, ScliStep, StdinPassword};
use crate::scheduler::model::{Node, Persona, Phase};

/// The MDM name of the primary, the secondary and the tie-breaker in the cluster.
pub const MDM_NAMES: [&str; 3] = ["mdm1", "mdm2", "tb"];

/// The trio's addresses, from the MDM nodes' agents (`None` until that persona is placed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trio {
    pub primary: Option<String>,
    pub secondary: Option<String>,
    pub tiebreaker: Option<String>,
}

impl Trio {
    pub fn of<'a>(nodes: impl Iterator<Item = &'a Node>) -> Trio {
        let mut t = Trio::default();
        for n in nodes {
            let slot = match n.persona {
                Persona::Primary => &mut t.primary,
                Persona::Secondary => &mut t.secondary,
                Persona::Tiebreaker => &mut t.tiebreaker,
                Persona::Data => continue,
            };
            if slot.is_none() {
                *slot = n.ip.as_deref().map(str::to_owned);
            }
        }
        t
    }

    /// `<primary>,<secondary>` as the SDC's `MDM_IP` and the gateway's `mdm.ip.addresses`
    /// want them; empty until both are known.
    pub fn managers(&self) -> Vec<String> {
        match (&self.primary, &self.secondary) {
            (Some(p), Some(s)) => vec![p.clone(), s.clone()],
            _ => Vec::new(),
        }
    }
}

fn step(name: &str, args: &[&str], stdin: &[StdinPassword], check: Option<Check>) -> ScliStep {
    ScliStep {
        name: name.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        stdin: stdin.to_vec(),
        verify: check.is_some(),
        check,
    }
}

/// The primary's steps, host-steps.md section 4, in order. Passwords go on standard input
/// (`--login` and `--set_password` without their password options), never on the argv.
pub fn creation_steps(pri: &str, sec: &str, tb: &str, system_name: &str) -> Vec<ScliStep> {
    let mut steps = vec![create_cluster(pri)];
    steps.extend(passwords());
    steps.extend(add_standbys(sec, tb));
    steps.push(three_nodes());
    steps.push(name_system(pri, system_name));
    steps
}

fn create_cluster(pri: &str) -> ScliStep {
    let [m1, _, _] = MDM_NAMES;
    step(
        "create the MDM cluster",
        &[
            "--create_mdm_cluster",
            "--master_mdm_ip",
            pri,
            "--master_mdm_management_ip",
            pri,
            "--master_mdm_name",
            m1,
            "--accept_license",
            "--approve_certificate",
        ],
        &[],
        Some(Check::ClusterExists),
    )
}

/// The factory login, the new admin password, and the login with it.
fn passwords() -> [ScliStep; 3] {
    use StdinPassword::{Admin, Factory};
    let mut factory_login = step(
        "log in with the factory password",
        &["--login", "--username", "admin"],
        &[Factory],
        Some(Check::PasswordSet),
    );
    factory_login.verify = false;
    [
        factory_login,
        step(
            "set the admin password",
            &["--set_password"],
            &[Factory, Admin],
            Some(Check::PasswordSet),
        ),
        step(
            "log in with the admin password",
            &["--login", "--username", "admin"],
            &[Admin],
            None,
        ),
    ]
}

fn add_standbys(sec: &str, tb: &str) -> [ScliStep; 2] {
    let [_, m2, t] = MDM_NAMES;
    [
        step(
            "add the secondary MDM",
            &[
                "--add_standby_mdm",
                "--new_mdm_ip",
                sec,
                "--mdm_role",
                "manager",
                "--new_mdm_management_ip",
                sec,
                "--new_mdm_name",
                m2,
            ],
            &[],
            Some(Check::Member { ip: sec.into() }),
        ),
        step(
            "add the tie-breaker",
            &[
                "--add_standby_mdm",
                "--new_mdm_ip",
                tb,
                "--mdm_role",
                "tb",
                "--new_mdm_name",
                t,
            ],
            &[],
            Some(Check::Member { ip: tb.into() }),
        ),
    ]
}

fn three_nodes() -> ScliStep {
    let [_, m2, t] = MDM_NAMES;
    step(
        "switch to a three-node cluster",
        &[
            "--switch_cluster_mode",
            "--cluster_mode",
            "3_node",
            "--add_slave_mdm_name",
            m2,
            "--add_tb_name",
            t,
        ],
        &[],
        Some(Check::Mode {
            mode: "3_node".into(),
        }),
    )
}

fn name_system(pri: &str, system_name: &str) -> ScliStep {
    step(
        "name the system",
        &[
            "--mdm_ip",
            pri,
            "--rename_system",
            "--new_name",
            system_name,
        ],
        &[],
        Some(Check::Named {
            name: system_name.into(),
        }),
    )
}

/// Past `cluster-init` on the way to `running` (a failed or lost node is not).
fn passed(p: Option<Phase>, phase: Phase) -> bool {
    p.is_some_and(|p| p > phase && p <= Phase::Running)
}

/// The `cluster-init` part of `node`'s plan in experimental mode; `None` for data nodes.
pub fn plan<'a>(
    node: &Node,
    all: impl Iterator<Item = &'a Node> + Clone,
    system_name: &str,
) -> Option<ClusterInit> {
    if !node.persona.is_mdm() {
        return None;
    }
    let trio = Trio::of(all.clone());
    let mdms: Vec<&Node> = all.filter(|n| n.persona.is_mdm()).collect();
    let cluster_created = mdms
        .iter()
        .any(|n| n.persona == Persona::Primary && passed(n.progress, Phase::ClusterInit));
    // The standby MDMs must run their MDM service before the primary adds them
    // (host-steps section 2: wait until the trio is past its packages).
    let installed = |p: Persona| {
        mdms.iter().any(|n| {
            n.persona == p
                && n.progress
                    .is_some_and(|x| x >= Phase::Devices && x <= Phase::Running)
        })
    };
    let mut waiting_for = None;
    let mut steps = Vec::new();
    match node.persona {
        Persona::Primary => match (&trio.primary, &trio.secondary, &trio.tiebreaker) {
            (Some(p), Some(s), Some(t))
                if installed(Persona::Secondary) && installed(Persona::Tiebreaker) =>
            {
                steps = creation_steps(p, s, t, system_name);
            }
            _ => {
                waiting_for =
                    Some("the secondary and tie-breaker nodes to install their MDM".to_string())
            }
        },
        _ if !cluster_created => {
            waiting_for = Some("the primary to create the MDM cluster".to_string())
        }
        _ => {}
    }
    Some(ClusterInit {
        role: node.persona,
        primary_ip: trio.primary.clone(),
        mdm_ips: trio.managers(),
        steps,
        waiting_for,
        cluster_created,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(agent: &str, persona: Persona, ip: &str, progress: Option<Phase>) -> Node {
        let mut n = Node::new(agent, agent, persona, 0);
        n.ip = Some(ip.into());
        n.progress = progress;
        n
    }

    fn cluster(progress: [Option<Phase>; 3]) -> Vec<Node> {
        vec![
            node("a1", Persona::Primary, "10.0.0.1", progress[0]),
            node("a2", Persona::Secondary, "10.0.0.2", progress[1]),
            node("a3", Persona::Tiebreaker, "10.0.0.3", progress[2]),
            node("a4", Persona::Data, "10.0.0.4", Some(Phase::Packages)),
        ]
    }

    #[test]
    fn the_steps_follow_host_steps_section_4_with_no_password_on_the_argv() {
        let s = creation_steps("10.0.0.1", "10.0.0.2", "10.0.0.3", "pool-sys");
        let lines: Vec<String> = s.iter().map(|s| s.args.join(" ")).collect();
        assert_eq!(
            lines,
            [
                "--create_mdm_cluster --master_mdm_ip 10.0.0.1 --master_mdm_management_ip 10.0.0.1 \
                 --master_mdm_name mdm1 --accept_license --approve_certificate",
                "--login --username admin",
                "--set_password",
                "--login --username admin",
                "--add_standby_mdm --new_mdm_ip 10.0.0.2 --mdm_role manager \
                 --new_mdm_management_ip 10.0.0.2 --new_mdm_name mdm2",
                "--add_standby_mdm --new_mdm_ip 10.0.0.3 --mdm_role tb --new_mdm_name tb",
                "--switch_cluster_mode --cluster_mode 3_node --add_slave_mdm_name mdm2 --add_tb_name tb",
                "--mdm_ip 10.0.0.1 --rename_system --new_name pool-sys",
            ]
        );
        use StdinPassword::*;
        assert_eq!(s[1].stdin, [Factory]);
        assert_eq!(s[2].stdin, [Factory, Admin], "old, then new");
        assert_eq!(s[3].stdin, [Admin]);
        assert!(s.iter().all(|s| !s
            .args
            .iter()
            .any(|a| a.contains("password") && a != "--set_password")));
        // Every step that is not idempotent is guarded by the state that shows it done.
        assert_eq!(s[0].check, Some(Check::ClusterExists));
        assert_eq!(s[2].check, Some(Check::PasswordSet));
        assert_eq!(
            s[4].check,
            Some(Check::Member {
                ip: "10.0.0.2".into()
            })
        );
        assert_eq!(
            s[6].check,
            Some(Check::Mode {
                mode: "3_node".into()
            })
        );
        assert_eq!(s[3].check, None, "a login is always repeated");
        assert!(!s[1].verify && s[2].verify && s[7].verify);
        let json = serde_json::to_value(&s[2]).unwrap();
        assert_eq!(json["stdin"], serde_json::json!(["factory", "admin"]));
        assert_eq!(json["check"], serde_json::json!({"kind": "password_set"}));
    }

    #[test]
    fn the_primary_waits_for_the_standbys_to_install_their_mdm() {
        let nodes = cluster([
            Some(Phase::ClusterInit),
            Some(Phase::Packages),
            Some(Phase::Devices),
        ]);
        let p = plan(&nodes[0], nodes.iter(), "s").unwrap();
        assert!(p.steps.is_empty());
        assert!(p.waiting_for.unwrap().contains("secondary"));
        assert_eq!(p.mdm_ips, ["10.0.0.1", "10.0.0.2"]);
        let nodes = cluster([
            Some(Phase::ClusterInit),
            Some(Phase::ClusterInit),
            Some(Phase::Devices),
        ]);
        let p = plan(&nodes[0], nodes.iter(), "s").unwrap();
        assert_eq!(p.steps.len(), 8);
        assert!(p.waiting_for.is_none() && !p.cluster_created);
        // A failed standby is not "installed".
        let mut nodes = nodes;
        nodes[2].progress = Some(Phase::Failed);
        assert!(plan(&nodes[0], nodes.iter(), "s").unwrap().steps.is_empty());
    }

    #[test]
    fn standbys_go_on_once_the_primary_has_passed_cluster_init() {
        let nodes = cluster([
            Some(Phase::ClusterInit),
            Some(Phase::ClusterInit),
            Some(Phase::ClusterInit),
        ]);
        let s = plan(&nodes[1], nodes.iter(), "s").unwrap();
        assert!(!s.cluster_created && s.steps.is_empty());
        assert!(s.waiting_for.unwrap().contains("primary"));
        let nodes = cluster([
            Some(Phase::StorageAttach),
            Some(Phase::ClusterInit),
            Some(Phase::ClusterInit),
        ]);
        for n in &nodes[1..3] {
            let s = plan(n, nodes.iter(), "s").unwrap();
            assert!(s.cluster_created && s.waiting_for.is_none() && s.steps.is_empty());
            assert_eq!(s.primary_ip.as_deref(), Some("10.0.0.1"));
        }
        assert!(
            plan(&nodes[3], nodes.iter(), "s").is_none(),
            "data nodes get none"
        );
    }

    #[test]
    fn managers_need_both_addresses() {
        let nodes = cluster([None, None, None]);
        assert_eq!(Trio::of(nodes.iter()).managers(), ["10.0.0.1", "10.0.0.2"]);
        assert!(Trio::of(nodes[1..].iter()).managers().is_empty());
    }
}
