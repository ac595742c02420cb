//! `cargo bench --bench store`: bytes the file store writes for one node's update when the
//! cluster has 10,000 nodes (a save costs what changed, not the whole model), and how long a
//! restarted scheduler takes to load that journal (`store_load_ms_10k`: the median of
//! [`LOADS`] loads, min-max on the `_spread` line), before it can tell any executor where it
//! is.

#[path = "../support/bench.rs"]
mod bench;

use storage_framework::mesos::types::TaskState;
use storage_framework::scheduler::model::{Node, Persisted, Persona, TaskRecord};
use storage_framework::scheduler::persist::StateStore;
use storage_framework::store::JournalStore;

const NODES: usize = 10_000;
const UPDATES: u64 = 1_000;
const LOADS: usize = 5;

fn main() {
    bench::print_in_process_binary();
    let dir = std::env::temp_dir().join(format!("bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("state.json");
    let mut state = Persisted::default();
    state.model.framework_id = Some("3f1c5a2e-7d4b-4c1e-9a8f-2b6d0e4c8a11-0000".into());
    for i in 0..NODES {
        // Realistic ids and a node well into its install: the size of a real record.
        let agent = format!("3f1c5a2e-7d4b-4c1e-9a8f-2b6d0e4c8a11-S{i}");
        let host = format!("node-{i:05}.rack-{}.example.com", i / 40);
        let mut node = Node::new(&agent, &host, Persona::Data, 1_700_000_000_000);
        let exec = format!("storage-executor.{host}.{i}");
        node.task = Some(
            TaskRecord::new(
                &format!("storage.{host}.{i}"),
                &exec,
                TaskState::Running,
                1_700_000_000_000,
            )
            .running_since(1_700_000_005_000)
            .with_secret("ab".repeat(32).as_str().into()),
        );
        node.devices = vec!["/dev/sdb".into(), "/dev/sdc".into()];
        node.attached = node.devices.clone();
        node.last_contact_ms = Some(1_700_000_009_000);
        state.model.nodes.insert(agent, node);
    }
    let mut store = StateStore::new(Box::new(JournalStore::new(&path).expect("path")));
    store.load().expect("load");
    store.save(&state).expect("first save");
    let start = std::fs::metadata(&path).expect("journal").len();
    let keys: Vec<String> = state.model.nodes.keys().map(|k| k.to_string()).collect();
    // One node's update per save, as a status update or a phase report makes it.
    let mut written_before = None;
    for u in 0..UPDATES {
        let key = &keys[(u as usize * 7919) % keys.len()];
        let node = state.model.nodes.get_mut(key).expect("node");
        node.last_contact_ms = Some(1_700_000_010_000 + u);
        node.updated_ms = 1_700_000_010_000 + u;
        if written_before.is_none() {
            written_before = Some(backend_written(&mut store));
        }
        assert!(store.save(&state).expect("save") >= 1);
    }
    let written = backend_written(&mut store) - written_before.unwrap_or(0);
    let per_update = written / UPDATES;
    println!("bench store_bytes_written_per_update_10k {per_update} bytes");
    // Compaction rewrites the live records (the file's size) once the journal has grown by as
    // much again, i.e. after file/per_update updates: it doubles the average.
    println!(
        "bench store_bytes_written_per_update_10k_with_compaction {} bytes",
        2 * per_update
    );
    println!("bench store_file_bytes_10k {start} bytes");
    let mut times = Vec::new();
    for _ in 0..LOADS {
        let mut again = StateStore::new(Box::new(JournalStore::new(&path).expect("path")));
        let t = std::time::Instant::now();
        let loaded = again.load().expect("load");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(loaded.model.nodes.len(), NODES, "every node loaded");
    }
    times.sort_by(f64::total_cmp);
    println!("bench store_load_ms_10k {:.1} ms", times[LOADS / 2]);
    println!(
        "bench store_load_ms_10k_spread {:.1}-{:.1} ms ({LOADS} loads of {} bytes, median above)",
        times[0],
        times[LOADS - 1],
        std::fs::metadata(&path).map_or(0, |m| m.len())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn backend_written(store: &mut StateStore) -> u64 {
    store.backend_mut().bytes_written()
}
