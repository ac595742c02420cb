//! What the scheduler hands a task: a node plan as JSON in `TaskInfo.data` (or nothing) and
//! settings as `STORAGE_*` environment variables. The settings may hold secrets, so their
//! values never reach a log line: [`TaskPayload::describe`] and `Debug` show names only.

use std::collections::BTreeMap;
use std::fmt;
use storage_framework::mesos::types::{CommandInfo, TaskInfo};

pub const SETTING_PREFIX: &str = "STORAGE_";

#[derive(Clone, Default, PartialEq, Eq)]
pub struct TaskPayload {
    /// `TaskInfo.data`; `None` when the scheduler sent nothing.
    pub data: Option<Vec<u8>>,
    /// `STORAGE_*` variables by name.
    pub settings: BTreeMap<String, String>,
}

impl TaskPayload {
    /// `inherited` are the `STORAGE_*` variables of this process (the agent applies the
    /// executor's CommandInfo environment to it); the task's own CommandInfo and its
    /// ExecutorInfo's CommandInfo, as carried by LAUNCH, take precedence.
    pub fn from_task(task: &TaskInfo, inherited: &BTreeMap<String, String>) -> TaskPayload {
        let mut settings: BTreeMap<String, String> = inherited
            .iter()
            .filter(|(name, _)| name.starts_with(SETTING_PREFIX))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        let commands = [
            task.executor.as_ref().and_then(|e| e.command.as_ref()),
            task.command.as_ref(),
        ];
        for command in commands.into_iter().flatten() {
            collect_settings(command, &mut settings);
        }
        TaskPayload {
            data: task
                .data
                .as_ref()
                .map(|d| d.0.clone())
                .filter(|d| !d.is_empty()),
            settings,
        }
    }

    /// One log-safe line: the size of the data and the names of the settings.
    pub fn describe(&self) -> String {
        let data = match &self.data {
            Some(d) => format!("task data {} bytes", d.len()),
            None => "no task data".to_string(),
        };
        if self.settings.is_empty() {
            format!("{data}, no {SETTING_PREFIX}* settings")
        } else {
            let names: Vec<&str> = self.settings.keys().map(String::as_str).collect();
            format!("{data}, settings {}", names.join(", "))
        }
    }
}

fn collect_settings(command: &CommandInfo, settings: &mut BTreeMap<String, String>) {
    let Some(env) = &command.environment else {
        return;
    };
    for var in &env.variables {
        // A SECRET-typed variable carries no value here: the agent resolves it.
        if let (true, Some(value)) = (var.name.starts_with(SETTING_PREFIX), &var.value) {
            settings.insert(var.name.to_string(), value.to_string());
        }
    }
}

impl fmt::Debug for TaskPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskPayload")
            .field("data_len", &self.data.as_ref().map(Vec::len))
            .field("settings", &self.settings.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The `STORAGE_*` variables of this process; values that are not UTF-8 are skipped.
pub fn inherited_settings() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(n, v)| Some((n.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(n, _)| n.starts_with(SETTING_PREFIX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage_framework::mesos::types::{environment::Variable, Environment, ExecutorInfo};
    use storage_framework::mesos::Bytes;

    fn env(vars: &[(&str, Option<&str>)]) -> CommandInfo {
        CommandInfo {
            environment: Some(Environment {
                variables: vars
                    .iter()
                    .map(|(n, v)| Variable {
                        name: (*n).into(),
                        value: v.map(Into::into),
                        r#type: None,
                    })
                    .collect(),
            }),
            ..Default::default()
        }
    }

    fn task() -> TaskInfo {
        TaskInfo {
            name: "storage-node".into(),
            data: Some(Bytes(br#"{"persona":"data"}"#.to_vec())),
            executor: Some(ExecutorInfo {
                command: Some(env(&[
                    ("STORAGE_SECRET", Some("s3cr3t-value")),
                    ("STORAGE_SCHEDULER", Some("http://10.0.0.1:8080")),
                    ("PATH", Some("/usr/bin")),
                    ("STORAGE_FROM_VAULT", None),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn data_and_prefixed_settings_are_kept() {
        let inherited = BTreeMap::from([
            ("STORAGE_SCHEDULER".to_string(), "http://old:1".to_string()),
            ("STORAGE_ONLY_HERE".to_string(), "x".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ]);
        let p = TaskPayload::from_task(&task(), &inherited);
        assert_eq!(p.data.as_deref(), Some(&br#"{"persona":"data"}"#[..]));
        let names: Vec<&str> = p.settings.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["STORAGE_ONLY_HERE", "STORAGE_SCHEDULER", "STORAGE_SECRET"]
        );
        assert_eq!(p.settings["STORAGE_SCHEDULER"], "http://10.0.0.1:8080");
        assert_eq!(p.settings["STORAGE_SECRET"], "s3cr3t-value");
    }

    #[test]
    fn empty_data_is_no_data() {
        let mut t = task();
        t.data = Some(Bytes(Vec::new()));
        assert_eq!(TaskPayload::from_task(&t, &BTreeMap::new()).data, None);
        t.data = None;
        let p = TaskPayload::from_task(&t, &BTreeMap::new());
        assert_eq!(p.data, None);
        assert!(p.describe().contains("no task data"));
    }

    #[test]
    fn values_never_show_in_logs() {
        let p = TaskPayload::from_task(&task(), &BTreeMap::new());
        for shown in [p.describe(), format!("{p:?}")] {
            assert!(!shown.contains("s3cr3t-value"), "{shown}");
            assert!(!shown.contains("10.0.0.1"), "{shown}");
            assert!(!shown.contains("persona"), "{shown}");
            assert!(shown.contains("STORAGE_SECRET"), "{shown}");
        }
        assert!(p.describe().contains("18 bytes"), "{}", p.describe());
    }
}
