//! Executor processes: the fetcher (CommandInfo URIs into the sandbox), the launch under
//! `/bin/sh -c` in its own process group, and the reaper that reports the exit.
//!
//! All of it runs on a thread per executor so that the cluster owner never blocks on I/O; the
//! thread reports back through the owner's channel.

use super::state::{Cmd, ProcessEvent};
use crate::isolation::{self, Action, Isolator};
use crossbeam_channel::Sender;
use std::fs;

use super::resources::Res;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};
use storage_framework::mesos::types::{command_info, environment, CommandInfo, TaskInfo};

pub const SIGKILL: i32 = 9;
pub const SIGTERM: i32 = 15;
const SIGCONT: i32 = 18;
const SIGSTOP: i32 = 19;

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// Signals the whole process group, so that children of `sh -c` go too.
pub fn signal_group(pid: u32, sig: i32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) has no memory effects. Callers forget the pid as soon as the reaper
    // reports the exit, so a group id is only signalled while its leader is ours.
    unsafe {
        kill(-pid, sig);
        // A group the cpu limit holds stopped must run to act on its SIGTERM.
        if sig == SIGTERM {
            kill(-pid, SIGCONT);
        }
    }
}

pub struct LaunchSpec {
    pub agent: usize,
    pub run: u64,
    pub directory: PathBuf,
    pub command: CommandInfo,
    /// The agent's MESOS_* variables; CommandInfo.environment is applied on top.
    pub env: Vec<(String, String)>,
    /// The container's `cpus` and `mem` (MB), enforced as the cgroup isolators would;
    /// `None` when the executor declared no memory.
    pub limits: Option<(f64, f64)>,
}

/// Fetches, spawns and reaps on a thread of its own; every outcome arrives as a `Cmd`.
pub fn launch(spec: LaunchSpec, tx: Sender<Cmd>) {
    let name = format!("executor-run-{}", spec.run);
    let tx2 = tx.clone();
    let (agent, run) = (spec.agent, spec.run);
    let spawned = thread::Builder::new().name(name).spawn(move || {
        let mut child = match prepare(&spec).and_then(|()| spawn(&spec)) {
            Ok(c) => c,
            Err(error) => {
                let _ = tx.send(Cmd::Process(ProcessEvent::LaunchFailed {
                    agent,
                    run,
                    error,
                }));
                return;
            }
        };
        let pid = child.id();
        if tx
            .send(Cmd::Process(ProcessEvent::Started { agent, run, pid }))
            .is_err()
        {
            // The cluster shut down while this executor was being fetched.
            signal_group(pid, SIGKILL);
            let _ = child.wait();
            return;
        }
        let (status, description) = match supervise(child, pid, spec.limits, &tx, (agent, run)) {
            Ok(s) => {
                let description = match (s.code(), s.signal()) {
                    (Some(c), _) => format!("exited with status {c}"),
                    (None, Some(sig)) => format!("terminated by signal {sig}"),
                    _ => "exited".to_string(),
                };
                (s.into_raw(), description)
            }
            Err(e) => (-1, format!("could not be waited for: {e}")),
        };
        let _ = tx.send(Cmd::Process(ProcessEvent::Exited {
            agent,
            run,
            status,
            description,
        }));
    });
    if spawned.is_err() {
        let _ = tx2.send(Cmd::Process(ProcessEvent::LaunchFailed {
            agent,
            run,
            error: "cannot spawn the launcher thread".into(),
        }));
    }
}

/// A command task's container holds the task and the command executor, whose own share
/// Mesos adds to the task's.
const COMMAND_EXECUTOR: (f64, f64) = (0.1, 32.0);

/// What the cgroup isolators limit a new container to: the executor's resources plus its
/// first task's; `None` (no enforcement) when neither declares memory.
pub fn container_limits(executor: &Res, task: &TaskInfo, command: bool) -> Option<(f64, f64)> {
    let task = Res::from_proto(&task.resources).unwrap_or_default();
    let (extra_cpus, extra_mem) = if command {
        COMMAND_EXECUTOR
    } else {
        (0.0, 0.0)
    };
    let cpus = executor.cpus + task.cpus + extra_cpus;
    let mem = executor.mem + task.mem + extra_mem;
    (task.mem + executor.mem > 0.0 && cpus > 0.0).then_some((cpus, mem))
}

/// Waits for the executor's exit while the container's limits are enforced on its process
/// group (`crate::isolation`, as the launcher does for its apps): throttled over `cpus`,
/// killed over `mem`, the agent told why before the kill so the tasks end with the reason.
fn supervise(
    mut child: std::process::Child,
    pid: u32,
    limits: Option<(f64, f64)>,
    tx: &Sender<Cmd>,
    (agent, run): (usize, u64),
) -> std::io::Result<std::process::ExitStatus> {
    let Some((cpus, mem)) = limits else {
        return child.wait();
    };
    let (exited_tx, exited) = crossbeam_channel::bounded(1);
    thread::Builder::new()
        .name(format!("executor-wait-{run}"))
        .spawn(move || {
            let _ = exited_tx.send(child.wait());
        })?;
    let mut isolator = Isolator::new(cpus, mem);
    loop {
        match exited.recv_timeout(isolation::PERIOD) {
            Ok(status) => return status,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other("lost track of the executor"));
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        match isolator.tick(Instant::now(), isolation::shared_group_usage(pid)) {
            Some(Action::Stop) => signal_group(pid, SIGSTOP),
            Some(Action::Continue) => signal_group(pid, SIGCONT),
            Some(Action::OomKill) => {
                let message = isolator.oom_message();
                let _ = tx.send(Cmd::Process(ProcessEvent::Limited {
                    agent,
                    run,
                    message,
                }));
                signal_group(pid, SIGKILL);
            }
            None => {}
        }
    }
}

fn prepare(spec: &LaunchSpec) -> Result<(), String> {
    fs::create_dir_all(&spec.directory).map_err(|e| {
        format!(
            "Failed to create sandbox '{}': {e}",
            spec.directory.display()
        )
    })?;
    let http = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build(),
    );
    for uri in &spec.command.uris {
        fetch(&http, uri, &spec.directory)
            .map_err(|e| format!("Failed to fetch '{}': {e}", uri.value))?;
    }
    Ok(())
}

/// One URI into the sandbox, as the Mesos fetcher does it for the schemes a loopback
/// cluster can serve: http, file and absolute paths.
pub fn fetch(http: &ureq::Agent, uri: &command_info::Uri, dir: &Path) -> Result<(), String> {
    let url = uri.value.as_str();
    let name = match &uri.output_file {
        Some(f) => {
            let p = Path::new(f.as_str());
            if f.is_empty()
                || p.components()
                    .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Err(format!(
                    "output_file {f:?} must be a relative path in the sandbox"
                ));
            }
            f.to_string()
        }
        None => {
            let path = url.split(['?', '#']).next().unwrap_or("");
            let base = path.rsplit('/').next().unwrap_or("");
            if base.is_empty() || base == "." || base == ".." {
                return Err("the URI has no file name; set output_file".into());
            }
            base.to_string()
        }
    };
    let dest = dir.join(&name);
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    if url.starts_with("http://") {
        let response = http.get(url).call().map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(format!("HTTP {status}"));
        }
        crate::fetched::write_from(&mut response.into_body().into_reader(), &dest)?;
    } else if let Some(path) = url
        .strip_prefix("file://")
        .or(url.starts_with('/').then_some(url))
    {
        crate::fetched::copy_from(Path::new(path), &dest)?;
    } else if url.starts_with("https://") {
        return Err("https is not supported by the devcluster fetcher".into());
    } else {
        return Err("unsupported URI scheme".into());
    }
    if uri.executable == Some(true) {
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", dest.display()))?;
    } else if uri.extract.unwrap_or(true) {
        extract(&dest, dir)?;
    }
    Ok(())
}

/// Archives are unpacked into the sandbox (`extract` defaults to true in mesos.proto). As
/// Mesos' fetcher does (`src/launcher/fetcher.cpp`), the name decides, case-sensitively:
/// tar and zip archives are unpacked; a bare `.gz` goes through `gunzip -d -c` into the name
/// without `.gz` (a plain new file, not executable); anything else stays as fetched.
fn extract(file: &Path, dir: &Path) -> Result<(), String> {
    let name = file.to_string_lossy();
    let tar = [
        ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz",
    ];
    let mut cmd = if tar.iter().any(|ext| name.ends_with(ext)) {
        let mut c = Command::new("tar");
        c.arg("-C").arg(dir).arg("-xf").arg(file);
        c
    } else if name.ends_with(".zip") {
        let mut c = Command::new("unzip");
        c.arg("-o").arg("-d").arg(dir).arg(file);
        c
    } else if let Some(unpacked) = name.strip_suffix(".gz") {
        // The shell opens the file it writes, not this process: a write descriptor of ours,
        // copied into a child another thread forks meanwhile, made the executor's exec fail
        // "Text file busy" (`fetched.rs`).
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "exec gunzip -d -c < \"$1\" > \"$2\"", "gunzip"])
            .arg(file)
            .arg(unpacked);
        c
    } else {
        return Ok(());
    };
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run the extractor: {e}"))?;
    if !status.success() {
        return Err(format!("extracting {} failed ({status})", file.display()));
    }
    Ok(())
}

fn spawn(spec: &LaunchSpec) -> Result<std::process::Child, String> {
    let command = &spec.command;
    let Some(value) = command.value.as_deref().filter(|v| !v.is_empty()) else {
        return Err("CommandInfo has no 'value' to run".into());
    };
    let mut cmd = if command.shell.unwrap_or(true) {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(value);
        c
    } else {
        // With shell=false, `arguments` is the whole argv, argv[0] included.
        let mut c = Command::new(value);
        if let Some((first, rest)) = command.arguments.split_first() {
            c.arg0(first.as_str());
            c.args(rest.iter().map(|a| a.as_str()));
        }
        c
    };
    let open = |name: &str| {
        fs::File::create(spec.directory.join(name))
            .map_err(|e| format!("cannot create the sandbox {name} file: {e}"))
    };
    cmd.current_dir(&spec.directory)
        .stdin(Stdio::null())
        .stdout(open("stdout")?)
        .stderr(open("stderr")?)
        .process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(env) = &command.environment {
        for var in &env.variables {
            let is_value = matches!(var.r#type, None | Some(environment::variable::Type::Value));
            if let (true, Some(v)) = (is_value, &var.value) {
                cmd.env(var.name.as_str(), v.as_str());
            }
        }
    }
    cmd.spawn()
        .map_err(|e| format!("Failed to run {value:?}: {e}"))
}

/// A Mesos duration string, as stout prints durations: the largest unit that fits.
pub fn mesos_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let units: [(f64, &str); 8] = [
        (7.0 * 86400e9, "weeks"),
        (86400e9, "days"),
        (3600e9, "hrs"),
        (60e9, "mins"),
        (1e9, "secs"),
        (1e6, "ms"),
        (1e3, "us"),
        (1.0, "ns"),
    ];
    for (size, unit) in units {
        if ns >= size {
            let v = ns / size;
            let v = (v * 1000.0).round() / 1000.0;
            return format!("{v}{unit}");
        }
    }
    "0ns".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_stout() {
        assert_eq!(mesos_duration(Duration::from_secs(900)), "15mins");
        assert_eq!(mesos_duration(Duration::from_secs(2)), "2secs");
        assert_eq!(mesos_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(mesos_duration(Duration::from_millis(1500)), "1.5secs");
        assert_eq!(mesos_duration(Duration::from_secs(60)), "1mins");
        assert_eq!(mesos_duration(Duration::ZERO), "0ns");
    }
}
