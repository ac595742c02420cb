//! `-teardown`: subscribe with the stored framework id, unregister it (Mesos then kills every
//! executor), and forget the id.

use crate::mesos::client::{ClientError, SchedulerClient};
use crate::mesos::scheduler::{call, Call};
use crate::mesos::types::FrameworkID;
use crate::scheduler::exit::{EXIT_FAILURE, EXIT_OK};
use crate::scheduler::flags::Config;
use crate::scheduler::master::{self, subscription};
use crate::scheduler::model::Persisted;
use crate::scheduler::persist::StateStore;
use log::{error, info};

/// A standby master's redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;

pub fn run(config: &Config, mut state: Persisted, mut store: StateStore) -> i32 {
    let Some(id) = state.model.framework_id.clone() else {
        error!(
            "-teardown: no framework id is stored in {}; nothing to tear down",
            store.describe()
        );
        return EXIT_FAILURE;
    };
    if let Err(e) = unregister(config, &id) {
        error!("-teardown: {e}");
        return EXIT_FAILURE;
    }
    state.model.framework_id = None;
    state.model.nodes.clear();
    // Rewritten whole: no earlier record of the framework id stays behind.
    if let Err(e) = store.replace(&state) {
        error!("-teardown: framework {id} torn down, but the state could not be saved: {e}");
        return EXIT_FAILURE;
    }
    info!("framework {id} torn down; its executors are being killed");
    EXIT_OK
}

/// SUBSCRIBE as framework `id` at the leading master, then TEARDOWN on that subscription.
fn unregister(config: &Config, id: &str) -> Result<(), String> {
    let subscribe = subscription::subscribe_call(&master::framework_info(config), Some(id));
    let mut address = config.masters[0].clone();
    for _ in 0..MAX_REDIRECTS {
        let mut client = SchedulerClient::new(&address, master::client_config(config))
            .map_err(|e| e.to_string())?;
        match client.subscribe(&subscribe) {
            Ok(_subscription) => {
                let teardown = Call {
                    framework_id: Some(FrameworkID { value: id.into() }),
                    r#type: Some(call::Type::Teardown),
                    ..Default::default()
                };
                return client
                    .call(&teardown)
                    .map_err(|e| format!("TEARDOWN failed: {e}"));
            }
            Err(ClientError::Redirect { leader, .. }) => address = leader,
            Err(e) => return Err(format!("SUBSCRIBE failed: {e}")),
        }
    }
    Err("too many redirects".into())
}
