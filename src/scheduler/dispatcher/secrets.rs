//! Executor secrets live with their launch ([`TaskRecord::secret`]): made with a launch,
//! revoked when the launch is replaced, its agent is gone or its node retired. Each change is
//! published from here to the REST side ([`SecretUpdate`]), which checks a caller's secret
//! before reading its request's body; the dispatcher stays the owner and checks every call
//! itself as well.
//!
//! A grant is published before its ACCEPT leaves (the executor cannot call earlier); a launch
//! undone after a failed save is revoked and the launch it replaced granted again.

use super::*;
use crate::scheduler::exchange::SecretUpdate;

impl Dispatcher {
    /// Publishes every change of the executor secrets to `feed`.
    pub fn set_secret_feed(&mut self, feed: Sender<SecretUpdate>) {
        self.secret_feed = Some(feed);
    }

    /// Publishes the secret of `task`, a launch just recorded (or put back): before its
    /// ACCEPT leaves.
    pub(super) fn publish_grant(&mut self, task: &TaskRecord) {
        if let Some(digest) = task.secret {
            self.publish(SecretUpdate::Known {
                executor_id: task.executor_id().into_owned(),
                digest,
            });
        }
    }

    /// Revokes the secret of `task` (replaced, its agent gone, its node retired or undone)
    /// and tells the REST side.
    pub(super) fn revoke_secret(&mut self, task: &mut TaskRecord) {
        if task.secret.take().is_some() {
            self.publish(SecretUpdate::Forget {
                executor_id: task.executor_id().into_owned(),
            });
        }
    }

    fn publish(&mut self, update: SecretUpdate) {
        // A REST server that stopped listening needs no more updates.
        if let Some(feed) = &self.secret_feed {
            if feed.send(update).is_err() {
                self.secret_feed = None;
            }
        }
    }
}
