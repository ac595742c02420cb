//! Builds the TaskInfo that puts the storage executor on a node (pure).

use crate::contract::{env, ids};
use crate::mesos::types::{
    command_info, environment, executor_info, AgentID, CommandInfo, DurationInfo, Environment,
    ExecutorID, ExecutorInfo, FrameworkID, Label, Labels, Resource, TaskID, TaskInfo,
};
use crate::scheduler::model::Persona;

/// What every launch shares.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    pub framework_id: String,
    /// Base URL of this scheduler's REST server as agents reach it, e.g. `http://10.0.0.5:8080`:
    /// where the agents' fetcher takes the executor binary.
    pub scheduler_url: String,
    /// The same server over TLS (`https://10.0.0.5:8080`): the executor API's base URL.
    pub api_url: String,
    /// `sha256:<hex>` of the certificate the REST server presents, the only one executors
    /// accept.
    pub fingerprint: String,
    /// Log level handed to the executors.
    pub loglevel: String,
    /// SHA-256 (hex) of the executor binary served now; `None` when it cannot be read (the
    /// command then refuses to run whatever was fetched).
    pub executor_sha256: Option<String>,
    /// The binary is served gzipped too (`/storage-executor.gz`), and launches fetch that.
    pub executor_gzipped: bool,
}

pub struct Launch<'a> {
    pub agent_id: &'a str,
    pub hostname: &'a str,
    pub seq: u64,
    pub persona: Persona,
    pub task_resources: Vec<Resource>,
    pub executor_resources: Vec<Resource>,
    /// The executor's secret for the scheduler's executor API.
    pub secret: &'a str,
}

fn var(name: &str, value: &str) -> environment::Variable {
    environment::Variable {
        name: name.into(),
        r#type: Some(environment::variable::Type::Value),
        value: Some(value.into()),
    }
}

/// The executor's shell command: the fetched binary's SHA-256 checked against `sha256`
/// before it is made executable (`gunzip` leaves it not) and `exec`ed, with `sha256sum` (coreutils, on Ubuntu 14.04 and RHEL 7 alike) and POSIX
/// sh only. The agents' fetcher takes the binary over plain HTTP, so whoever sits between
/// them and the scheduler could swap it; a mismatch says so on stderr (the sandbox's
/// `stderr`) and exits 1 before anything of the download runs.
pub fn verified_exec(sha256: Option<&str>, url: &str) -> String {
    let file = env::EXECUTOR_BINARY;
    // Shown in single quotes: nothing in it may end them.
    let url: String = url.chars().filter(|c| *c != '\'').collect();
    let Some(want) = sha256.filter(|d| crate::sha256::is_hex_digest(d)) else {
        return format!(
            "echo '{file}: not run: the scheduler could not read the executor binary it \
             serves, so it has no SHA-256 to check the download from {url} against' >&2; exit 1"
        );
    };
    let want = want.to_ascii_lowercase();
    format!(
        "got=$(sha256sum ./{file}) || {{ echo '{file}: not run: cannot compute its SHA-256' >&2; \
         exit 1; }}; got=${{got%% *}}; if [ \"$got\" != {want} ]; then \
         printf '%s: not run: SHA-256 mismatch: fetched %s, expected %s (from %s)\\n' \
         {file} \"$got\" {want} '{url}' >&2; exit 1; fi; chmod u+x ./{file} && exec ./{file}"
    )
}

/// The TaskInfo of one launch.
pub fn task_info(ctx: &LaunchContext, l: Launch<'_>) -> TaskInfo {
    let (task_id, executor_id) = ids::make(l.hostname, l.seq);
    // Gzipped, the fetcher unpacks it (a bare `.gz`: `gunzip` into the name without `.gz`)
    // and leaves it not executable: the command makes it so once its digest is checked.
    let gz = if ctx.executor_gzipped { ".gz" } else { "" };
    let url = format!("{}/{}{gz}", ctx.scheduler_url, env::EXECUTOR_BINARY);
    let command = CommandInfo {
        uris: vec![command_info::Uri {
            value: url.as_str().into(),
            executable: Some(!ctx.executor_gzipped),
            extract: Some(ctx.executor_gzipped),
            // The binary changes with every scheduler upgrade: never take a cached copy.
            cache: Some(false),
            output_file: None,
        }],
        environment: Some(Environment {
            variables: vec![
                var(env::SCHEDULER_URL, &ctx.api_url),
                var(env::PERSONA, l.persona.as_str()),
                var(env::LOG_LEVEL, &ctx.loglevel),
            ],
        }),
        value: Some(verified_exec(ctx.executor_sha256.as_deref(), &url).into()),
        shell: Some(true),
        ..Default::default()
    };
    // The secret travels in the task's data, which the master's and agents' state endpoints
    // do not serve (unlike the ExecutorInfo environment): Mesos' `json(const Task&)` writes no
    // data field, and a `Task` does not even keep it.
    let data = serde_json::json!({
        env::DATA_EXECUTOR_SECRET: l.secret,
        env::DATA_SCHEDULER_FINGERPRINT: ctx.fingerprint,
    })
    .to_string();
    TaskInfo {
        name: format!("storage {} on {}", l.persona, l.hostname).into(),
        data: Some(crate::mesos::Bytes(data.into_bytes())),
        task_id: TaskID {
            value: task_id.into(),
        },
        agent_id: AgentID {
            value: l.agent_id.into(),
        },
        resources: l.task_resources,
        executor: Some(ExecutorInfo {
            r#type: Some(executor_info::Type::Custom),
            executor_id: ExecutorID {
                value: executor_id.into(),
            },
            framework_id: Some(FrameworkID {
                value: ctx.framework_id.as_str().into(),
            }),
            command: Some(command),
            resources: l.executor_resources,
            name: Some(format!("storage executor ({})", l.persona).into()),
            shutdown_grace_period: Some(DurationInfo {
                nanoseconds: 10_000_000_000,
            }),
            labels: Some(Labels {
                labels: vec![Label {
                    key: env::PERSONA_LABEL.into(),
                    value: Some(l.persona.as_str().into()),
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executor_fetches_itself_from_the_scheduler() {
        let ctx = LaunchContext {
            framework_id: "fw".into(),
            scheduler_url: "http://10.0.0.5:8080".into(),
            api_url: "https://10.0.0.5:8080".into(),
            fingerprint: "sha256:ab".into(),
            loglevel: "debug".into(),
            executor_sha256: Some("ab".repeat(32)),
            executor_gzipped: true,
        };
        let launch = || Launch {
            agent_id: "a1",
            hostname: "h1",
            seq: 3,
            persona: Persona::Data,
            task_resources: vec![],
            executor_resources: vec![],
            secret: "s3cr3t",
        };
        // Without its gzip copy the binary is fetched as it is, made executable by the fetcher.
        let plain = task_info(
            &LaunchContext {
                executor_gzipped: false,
                ..ctx.clone()
            },
            launch(),
        );
        let uri = &plain.executor.unwrap().command.unwrap().uris[0];
        assert_eq!(uri.value, "http://10.0.0.5:8080/storage-executor");
        assert_eq!((uri.executable, uri.extract), (Some(true), Some(false)));
        let t = task_info(&ctx, launch());
        let ex = t.executor.unwrap();
        let cmd = ex.command.unwrap();
        // Gzipped: the fetcher unpacks a bare `.gz` only when asked to extract and not to
        // make it executable.
        assert_eq!(
            cmd.uris[0].value,
            "http://10.0.0.5:8080/storage-executor.gz"
        );
        assert_eq!(
            (cmd.uris[0].executable, cmd.uris[0].extract),
            (Some(false), Some(true))
        );
        assert_eq!(cmd.shell, Some(true));
        let value = cmd.value.as_deref().unwrap();
        assert!(
            value.contains(&"ab".repeat(32)) && value.ends_with("exec ./storage-executor"),
            "{value}"
        );
        let env = cmd.environment.unwrap().variables;
        assert!(
            env.iter().all(|v| v.value.as_deref() != Some("s3cr3t")),
            "the secret is in the environment"
        );
        let api_url = env.iter().find(|v| v.name == env::SCHEDULER_URL).unwrap();
        assert_eq!(api_url.value.as_deref(), Some("https://10.0.0.5:8080"));
        let data: serde_json::Value = serde_json::from_slice(&t.data.unwrap().0).unwrap();
        assert_eq!(data["executor_secret"], "s3cr3t");
        assert_eq!(data["scheduler_fingerprint"], "sha256:ab");
        assert_eq!(ex.framework_id.unwrap().value, "fw");
        assert_eq!(t.task_id.value, "storage.h1.3");
    }

    /// Runs the command under `/bin/sh -c` as an agent does, in a sandbox holding `binary`
    /// as the fetched executor; its exit status, stdout and stderr.
    fn run_in_sandbox(name: &str, binary: &[u8], command: &str) -> (i32, String, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("launch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(env::EXECUTOR_BINARY);
        std::fs::write(&file, binary).unwrap();
        // As `gunzip` leaves it (the fetcher's `extract`): the command makes it executable.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .current_dir(&dir)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn the_fetched_binary_runs_only_with_the_digest_served() {
        let binary = b"#!/bin/sh\necho executor ran \"$@\"\n";
        let url = "http://10.0.0.5:8080/storage-executor";
        let right = crate::sha256::hex(binary);
        let (code, out, err) = run_in_sandbox("ok", binary, &verified_exec(Some(&right), url));
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (0, "executor ran\n", "")
        );

        let served = crate::sha256::hex(b"the binary the scheduler serves");
        let (code, out, err) = run_in_sandbox("swap", binary, &verified_exec(Some(&served), url));
        assert_eq!(code, 1);
        assert_eq!(out, "", "the swapped binary ran");
        assert_eq!(
            err,
            format!(
                "storage-executor: not run: SHA-256 mismatch: fetched {right}, expected {served} \
                 (from {url})\n"
            )
        );

        let (code, out, err) = run_in_sandbox("none", binary, &verified_exec(None, url));
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(err.contains("no SHA-256 to check"), "{err}");
        // A quote in the URL cannot end the quoting.
        let odd = "http://x'; echo pwned; '/storage-executor";
        let (code, out, _) = run_in_sandbox("quote", binary, &verified_exec(Some(&served), odd));
        assert_eq!((code, out.as_str()), (1, ""));
    }
}
