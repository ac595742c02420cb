//! `storage-devcluster`: a local Mesos master with agents, a Marathon-compatible launcher and
//! a storage gateway, all on loopback. See `--help`.

use devcluster::{control, gateway, host, launcher, master};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const HELP: &str = "\
storage-devcluster: a local cluster for the storage framework, on loopback

USAGE: storage-devcluster [OPTIONS]

OPTIONS:
  --agents N              simulated agents, each with its own executor processes (default 3)
  --synthetic-agents N    more agents, synthetic-1..synthetic-N (attributes keys too), whose
                          executors are emulated without processes: a scheduler at scale (default 0)
  --attributes FILE       JSON agent attributes: {\"agent-1\": {\"storage-persona\": \"primary\"}, ...}
  --heartbeat SECS        master heartbeat interval of scheduler streams (default 15)
  --agent-ping-timeout SECS
                          the master's agent_ping_timeout: an agent away 5 of them is marked
                          unreachable (default 15, Mesos's)
  --reboot-outage SECS    how long a rebooting host is away before its agent registers under
                          a new id (default: 6 agent ping timeouts, so that the old agent is
                          unreachable first, as after a real reboot)
  --work-dir DIR          sandboxes and state, kept after the stop (default: a new directory
                          under the temp dir, whose sandboxes are removed)
  --launcher-port PORT    Marathon-compatible launcher port (default 0: ephemeral)
  --control-port PORT     fault-injection API port (default 0: ephemeral)
  --gateway-password PW   storage gateway admin password (default Scaleio123)
  --empty-gateway         start the gateway without a storage system (experimental mode)
  --gateway-latency-ms MS every gateway reply takes at least this long (default 3)
  --rebuild-seconds S     how long the gateway's pools take to rebuild what an SDS missed,
                          after each outage once it is back (default 1)
  --mdm IP,IP,IP          primary, secondary and tie-breaker MDM addresses the gateway reports
                          (default 127.0.0.1,127.0.0.2,127.0.0.3)
  --ready-file PATH       once everything listens, write its addresses there as JSON
  --zk URL                the master's `zk` flag in GET /flags (e.g. zk://127.0.0.1:2181/mesos)
  --host-profile P[,P...] host stand-ins: each agent gets a fake root of profile P (ubuntu14,
                          rhel7, centos7, ubuntu16; a list gives one per agent) and its
                          executors run the stand-in commands (storage-host-standin, looked
                          for next to this binary); see tests/devcluster/src/host.rs
  -h, --help              this text

Everything it serves is printed at startup. SIGTERM or SIGINT stops it and every process it
started. The fault-injection API is documented in tests/devcluster/src/control.rs.";

struct Options {
    agents: usize,
    synthetic_agents: usize,
    attributes: Option<PathBuf>,
    heartbeat: f64,
    agent_ping_timeout: f64,
    reboot_outage: Option<f64>,
    work_dir: Option<PathBuf>,
    launcher_port: u16,
    control_port: u16,
    gateway_password: String,
    empty_gateway: bool,
    gateway_latency: std::time::Duration,
    rebuild: Duration,
    mdm: [String; 3],
    ready_file: Option<PathBuf>,
    zk: Option<String>,
    host_profiles: Vec<host::HostProfile>,
}

/// A positive, finite number of seconds.
fn seconds(flag: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("{flag}: {v:?} is not a positive number of seconds"))
}

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut o = Options {
        agents: 3,
        synthetic_agents: 0,
        attributes: None,
        heartbeat: 15.0,
        agent_ping_timeout: 15.0,
        reboot_outage: None,
        work_dir: None,
        launcher_port: 0,
        control_port: 0,
        gateway_password: "Scaleio123".into(),
        empty_gateway: false,
        gateway_latency: gateway::DEFAULT_LATENCY,
        rebuild: gateway::DEFAULT_REBUILD_TIME,
        mdm: ["127.0.0.1".into(), "127.0.0.2".into(), "127.0.0.3".into()],
        ready_file: None,
        zk: None,
        host_profiles: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs {what}"))
        };
        match name {
            "-h" | "--help" => return Ok(None),
            "--agents" => {
                o.agents = value("a number")?
                    .parse()
                    .map_err(|_| "--agents: not a number".to_string())?
            }
            "--synthetic-agents" => {
                o.synthetic_agents = value("a number")?
                    .parse()
                    .map_err(|_| "--synthetic-agents: not a number".to_string())?
            }
            "--attributes" => o.attributes = Some(value("a file")?.into()),
            "--heartbeat" => {
                o.heartbeat = value("seconds")?
                    .parse()
                    .ok()
                    .filter(|h: &f64| *h > 0.0 && h.is_finite())
                    .ok_or("--heartbeat: not a positive number of seconds")?
            }
            "--agent-ping-timeout" => o.agent_ping_timeout = seconds(name, &value("seconds")?)?,
            "--reboot-outage" => o.reboot_outage = Some(seconds(name, &value("seconds")?)?),
            "--work-dir" => o.work_dir = Some(value("a directory")?.into()),
            "--launcher-port" => {
                o.launcher_port = value("a port")?
                    .parse()
                    .map_err(|_| "--launcher-port: not a port".to_string())?
            }
            "--control-port" => {
                o.control_port = value("a port")?
                    .parse()
                    .map_err(|_| "--control-port: not a port".to_string())?
            }
            "--gateway-password" => o.gateway_password = value("a password")?,
            "--empty-gateway" => o.empty_gateway = true,
            "--gateway-latency-ms" => {
                o.gateway_latency = value("milliseconds")?
                    .parse()
                    .map(std::time::Duration::from_millis)
                    .map_err(|_| "--gateway-latency-ms: not a number of milliseconds".to_string())?
            }
            "--rebuild-seconds" => {
                o.rebuild = control::rebuild_seconds(&value("seconds")?)
                    .map_err(|e| format!("--rebuild-seconds: {e}"))?
            }
            "--mdm" => {
                let v = value("three addresses")?;
                let ips: Vec<&str> = v.split(',').collect();
                if ips.len() != 3 || ips.iter().any(|ip| ip.parse::<std::net::IpAddr>().is_err()) {
                    return Err(format!(
                        "--mdm: {v:?} is not three comma-separated IP addresses"
                    ));
                }
                o.mdm = [ips[0].into(), ips[1].into(), ips[2].into()];
            }
            "--ready-file" => o.ready_file = Some(value("a path")?.into()),
            "--zk" => {
                let v = value("a zk:// URL")?;
                if !v.starts_with("zk://") {
                    return Err(format!("--zk: {v:?} is not a zk:// URL"));
                }
                o.zk = Some(v);
            }
            "--host-profile" => {
                o.host_profiles = value("a profile")?
                    .split(',')
                    .map(host::HostProfile::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--host-profile: {e}"))?
            }
            other => return Err(format!("unknown option {other} (see --help)")),
        }
    }
    if o.host_profiles.len() > 1 && o.host_profiles.len() != o.agents {
        return Err(format!(
            "--host-profile: {} profiles for {} agents (give one, or one per agent)",
            o.host_profiles.len(),
            o.agents
        ));
    }
    Ok(Some(o))
}

/// Host stand-ins as `--host-profile` asks, the binary being next to this one.
fn host_standins(
    profiles: &[host::HostProfile],
    control_url: String,
) -> Result<host::HostStandins, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("--host-profile: cannot find this binary: {e}"))?;
    let bin = exe
        .parent()
        .map(|d| d.join(host::STANDIN_BIN))
        .ok_or("--host-profile: this binary has no directory")?;
    if !bin.is_file() {
        return Err(format!(
            "--host-profile: {} not found (build it: cargo build -p storage-devcluster)",
            bin.display()
        ));
    }
    let mut h = host::HostStandins::new(bin, Some(control_url));
    if let Some(first) = profiles.first() {
        h.profile = *first;
    }
    if profiles.len() > 1 {
        h.per_agent = profiles
            .iter()
            .enumerate()
            .map(|(i, p)| (i + 1, *p))
            .collect();
    }
    Ok(h)
}

fn run(o: Options) -> Result<(), String> {
    // A work dir the user named keeps its sandboxes and host roots after the stop: that is
    // where demo.sh and its tests look for what happened.
    let keep_work_dir = o.work_dir.is_some();
    let work_dir = o.work_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("storage-devcluster-{}", std::process::id()))
    });
    std::fs::create_dir_all(&work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;

    // Bound first: the agents hand its URL to the host stand-ins of their executors.
    let control_listener = control::bind(o.control_port)?;
    let host_standins = if o.host_profiles.is_empty() {
        None
    } else {
        Some(host_standins(&o.host_profiles, control_listener.url())?)
    };
    let master = Arc::new(master::start(master::MasterConfig {
        agents: o.agents,
        synthetic_agents: o.synthetic_agents,
        attributes_file: o.attributes,
        heartbeat_interval: Duration::from_secs_f64(o.heartbeat),
        agent_removal_timeout: Duration::from_secs_f64(o.agent_ping_timeout * 5.0),
        reboot_outage: o.reboot_outage.map(Duration::from_secs_f64),
        work_dir: work_dir.join("mesos"),
        keep_work_dir,
        host_standins,
        zk: o.zk.clone(),
        ..Default::default()
    })?);
    let mut gw_cfg = gateway::GatewayConfig::new(
        &o.gateway_password,
        gateway::MdmIps {
            primary: o.mdm[0].clone(),
            secondary: o.mdm[1].clone(),
            tiebreaker: o.mdm[2].clone(),
        },
    );
    if o.empty_gateway {
        gw_cfg.preconfigured = None;
    }
    gw_cfg.latency = o.gateway_latency;
    gw_cfg.rebuild_time = o.rebuild;
    let gateway = Arc::new(gateway::start(gw_cfg)?);
    let launcher = launcher::start(launcher::LauncherConfig {
        port: o.launcher_port,
        work_dir: work_dir.join("launcher"),
        ..Default::default()
    })?;
    let control = control_listener.serve(control::Targets {
        master: master.clone(),
        gateway: Some(gateway.clone()),
    })?;

    let agents = master.agents()?;
    let ready = json!({
        "master": master.addr().to_string(),
        "standby_master": master.standby_addr().to_string(),
        "launcher": launcher.addr().to_string(),
        "gateway": gateway.url(),
        "control": control.url(),
        "work_dir": work_dir.display().to_string(),
        "agents": agents.iter().map(|a| json!({
            "hostname": a.hostname, "id": a.id, "ip": a.ip.to_string(),
            "endpoint": a.endpoint.to_string(),
            "host_root": (!o.host_profiles.is_empty()).then(|| {
                host::agent_root(&master.work_dir().join(&a.hostname)).display().to_string()
            }),
        })).collect::<Vec<_>>(),
    });
    println!("master           http://{}", master.addr());
    println!("standby master   http://{}", master.standby_addr());
    println!("launcher         {}", launcher.url());
    println!("storage gateway  {}", gateway.url());
    println!("control API      {}", control.url());
    // Synthetic agents have no address of their own: one line for all of them.
    for a in agents.iter().filter(|a| !a.synthetic) {
        println!(
            "agent            {} {} http://{}",
            a.hostname, a.ip, a.endpoint
        );
    }
    let synthetic = agents.iter().filter(|a| a.synthetic).count();
    if synthetic > 0 {
        println!("synthetic agents {synthetic} (executors emulated in-process)");
    }

    println!("work dir         {}", work_dir.display());
    if let Some(path) = &o.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&ready).unwrap_or_default())
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("--ready-file {}: {e}", path.display()))?;
    }

    // Block until SIGTERM/SIGINT, then stop everything (dropping the handles ends the
    // servers and kills every child process).
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    if let Some(sig) = signals.forever().next() {
        eprintln!("storage-devcluster: signal {sig}, stopping");
    }
    drop(control);
    drop(launcher);
    drop(gateway);
    drop(master);
    Ok(())
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args) {
        Ok(None) => println!("{HELP}"),
        Ok(Some(o)) => {
            if let Err(e) = run(o) {
                eprintln!("storage-devcluster: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("storage-devcluster: {e}");
            std::process::exit(2);
        }
    }
}
