//! Task and executor ids: `storage.<host>.<seq>` and `storage-executor.<host>.<seq>`. Unique
//! per launch (the sequence number is persisted), readable (the host name is in them), and
//! valid Mesos ids (no `/`, spaces or control characters).

/// Every task id of the framework starts with this.
pub const TASK_PREFIX: &str = "storage.";
/// Every executor id of the framework starts with this.
pub const EXECUTOR_PREFIX: &str = "storage-executor.";
/// The longest host part of an id.
const MAX_HOST: usize = 100;

/// The task id and executor id of launch `seq` on `hostname`.
pub fn make(hostname: &str, seq: u64) -> (String, String) {
    let host: String = hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_HOST)
        .collect();
    (
        format!("{TASK_PREFIX}{host}.{seq}"),
        format!("{EXECUTOR_PREFIX}{host}.{seq}"),
    )
}

/// The part of a task id after its prefix (`<host>.<seq>`), when it is one of ours.
pub fn task_suffix(task_id: &str) -> Option<&str> {
    task_id.strip_prefix(TASK_PREFIX)
}

/// The part of an executor id after its prefix, when it is one of ours.
pub fn executor_suffix(executor_id: &str) -> Option<&str> {
    executor_id.strip_prefix(EXECUTOR_PREFIX)
}

/// A task id of this framework's scheme.
pub fn is_task_id(id: &str) -> bool {
    task_suffix(id).is_some()
}

/// An executor id of this framework's scheme.
pub fn is_executor_id(id: &str) -> bool {
    executor_suffix(id).is_some()
}

/// The executor id a task id of the scheme pairs with.
pub fn executor_of_task(task_id: &str) -> Option<String> {
    task_suffix(task_id).map(|s| format!("{EXECUTOR_PREFIX}{s}"))
}

/// Whether `executor_id` is the one paired with `task_id` (no allocation).
pub fn pairs(task_id: &str, executor_id: &str) -> bool {
    task_suffix(task_id).is_some_and(|t| executor_suffix(executor_id) == Some(t))
}

/// The sequence number of an id of either scheme.
pub fn seq(id: &str) -> Option<u64> {
    let suffix = task_suffix(id).or_else(|| executor_suffix(id))?;
    suffix.rsplit_once('.')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_clean_and_round_trip() {
        let (t, e) = make("node 1/rack:a", 7);
        assert_eq!(t, "storage.node-1-rack-a.7");
        assert_eq!(e, "storage-executor.node-1-rack-a.7");
        assert!(is_task_id(&t) && is_executor_id(&e));
        assert!(!is_task_id(&e) && !is_executor_id(&t));
        assert_eq!(executor_of_task(&t).as_deref(), Some(e.as_str()));
        assert!(pairs(&t, &e));
        assert!(!pairs(&t, "storage-executor.node-1-rack-a.8"));
        assert_ne!(make("h", 1), make("h", 2));
        assert_eq!((seq(&t), seq(&e)), (Some(7), Some(7)));
        assert_eq!(task_suffix(&t), executor_suffix(&e));
        let (long, _) = make(&"h".repeat(300), 1);
        assert_eq!(long.len(), TASK_PREFIX.len() + MAX_HOST + 2);
        assert_eq!(executor_of_task("t-a1"), None);
        assert_eq!(seq("other.h.1"), None);
    }
}
