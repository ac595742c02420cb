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

/// The TaskInfo of one launch.
pub fn task_info(ctx: &LaunchContext, l: Launch<'_>) -> TaskInfo {
    let (task_id, executor_id) = ids::make(l.hostname, l.seq);
    let command = CommandInfo {
        uris: vec![command_info::Uri {
            value: format!("{}/{}", ctx.scheduler_url, env::EXECUTOR_BINARY).into(),
            executable: Some(true),
            extract: Some(false),
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
        value: Some(format!("./{}", env::EXECUTOR_BINARY).into()),
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
        };
        let t = task_info(
            &ctx,
            Launch {
                agent_id: "a1",
                hostname: "h1",
                seq: 3,
                persona: Persona::Data,
                task_resources: vec![],
                executor_resources: vec![],
                secret: "s3cr3t",
            },
        );
        let ex = t.executor.unwrap();
        let cmd = ex.command.unwrap();
        assert_eq!(cmd.uris[0].value, "http://10.0.0.5:8080/storage-executor");
        assert_eq!(cmd.uris[0].executable, Some(true));
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
}
