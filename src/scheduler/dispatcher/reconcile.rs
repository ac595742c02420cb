//! Reconciliation with the master: what we believe is live, and what we do not know of.

use super::*;

impl Dispatcher {
    /// Explicit reconciliation of the active tasks, then implicit reconciliation.
    pub(super) fn reconcile_all(&mut self) {
        // Explicit reconciliation of what we believe is live, then implicit to learn of
        // tasks we do not know (a launch whose record was lost is killed when it shows up).
        let tasks: Vec<call::reconcile::Task> = self
            .state
            .model
            .nodes
            .values()
            .filter_map(|n| {
                let t = n.task.as_ref().filter(|t| t.is_active())?;
                Some(call::reconcile::Task {
                    task_id: TaskID {
                        value: t.task_id.as_str().into(),
                    },
                    agent_id: Some(AgentID {
                        value: n.agent_id.as_str().into(),
                    }),
                })
            })
            .collect();
        if !tasks.is_empty() {
            info!("reconciling {} known tasks", tasks.len());
            let mut c = self.call(call::Type::Reconcile);
            c.reconcile = Some(call::Reconcile { tasks });
            self.pending.push(c);
        }
        let mut c = self.call(call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile::default());
        self.pending.push(c);
    }
}
