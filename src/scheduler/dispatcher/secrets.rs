//! Executor secrets change in one place: granted with a launch, revoked when the launch is
//! replaced, its agent is gone or its node retired. Each change is also published to the
//! REST side ([`SecretUpdate`]), which checks a caller's secret before reading its request's
//! body; the dispatcher stays the owner and checks every call itself as well.
//!
//! A grant is published before its ACCEPT leaves (the executor cannot call earlier); a
//! launch rolled back after a failed save leaves a grant behind at the REST side, which only
//! lets that id's calls through to the dispatcher, where they get 404.

use super::*;
use crate::scheduler::exchange::SecretUpdate;
use crate::secret::Secret;

impl Dispatcher {
    /// Publishes every change of the executor secrets to `feed`.
    pub fn set_secret_feed(&mut self, feed: Sender<SecretUpdate>) {
        self.secret_feed = Some(feed);
    }

    pub(super) fn grant_secret(&mut self, executor_id: &str, secret: &str) {
        self.state
            .executor_secrets
            .insert(executor_id.to_owned(), secret.to_owned());
        self.publish(SecretUpdate::Known {
            executor_id: executor_id.to_owned(),
            secret: Secret::new(secret),
        });
    }

    pub(super) fn revoke_secret(&mut self, executor_id: &str) {
        if self.state.executor_secrets.remove(executor_id).is_some() {
            self.publish(SecretUpdate::Forget {
                executor_id: executor_id.to_owned(),
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
