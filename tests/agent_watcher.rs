//! The agent watcher against the dev cluster's master: a cluster whose
//! `/master/state` is far beyond the old 1 MiB cap is still listed in full, a standby
//! master's redirect is followed, and the watcher ends when its stop channel closes.

use devcluster::master::{self, MasterConfig};
use std::time::Duration;
use storage_framework::mesos::client::ClientConfig;
use storage_framework::scheduler::exchange::Input;
use storage_framework::scheduler::master::agent_watcher;

const AGENTS: usize = 3000;

#[test]
fn thousands_of_agents_are_listed_through_the_standby() {
    let dir = std::env::temp_dir().join(format!("agent-watcher-{}", std::process::id()));
    let m = master::start(MasterConfig {
        agents: 0,
        synthetic_agents: AGENTS,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    // The state of this cluster would not have fitted the old cap.
    let state = ureq::get(&format!("http://{}/master/state", m.addr()))
        .call()
        .expect("state")
        .into_body()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .expect("state body");
    assert!(state.len() > 1 << 20, "state is only {} bytes", state.len());

    let (tx, rx) = crossbeam_channel::unbounded();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    // The standby first: it answers 307 to the leader.
    let masters = vec![m.standby_addr().to_string(), m.addr().to_string()];
    let watcher = std::thread::spawn(move || {
        agent_watcher::run(
            masters,
            ClientConfig::default(),
            Duration::from_secs(30),
            tx,
            stop_rx,
        )
    });
    let listed = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Input::Agents(a)) => a,
        Ok(other) => panic!("unexpected input {other:?}"),
        Err(e) => panic!("no agent list: {e}"),
    };
    assert_eq!(listed.len(), AGENTS);
    assert!(listed
        .iter()
        .all(|a| !a.id.is_empty() && !a.hostname.is_empty()));
    drop(stop_tx);
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = watcher.join();
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the watcher did not stop"
    );
    m.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
