//! Executables written and started by one multi-threaded process. A child forked while
//! another thread holds a freshly fetched executable open for writing inherits that write
//! descriptor until its own exec; starting the fetched file in that window fails with
//! "Text file busy" (ETXTBSY). The Mesos agent and Marathon never meet this: their fetcher is
//! a separate process. Here the agents' and the launcher's fetchers share the process with
//! every spawn (100 executors launched at once in `converge` hit it), so writes of fetched
//! files and spawns exclude each other: many writes at a time, or one spawn.

use std::sync::RwLock;

static FORK: RwLock<()> = RwLock::new(());

/// Runs `f`, which opens a file for writing and closes it, while no child is being spawned.
pub fn writing<T>(f: impl FnOnce() -> T) -> T {
    let _guard = FORK.read().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Runs `f`, which spawns a child (`Command::spawn` returns once the child has exec'd and so
/// dropped its inherited descriptors), while no fetched file is open for writing.
pub fn spawning<T>(f: impl FnOnce() -> T) -> T {
    let _guard = FORK.write().unwrap_or_else(|e| e.into_inner());
    f()
}
