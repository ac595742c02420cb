//! Test fault points. The end-to-end tests need the scheduler stopped at instants no signal
//! can hit reliably from outside; `STORAGE_TEST_FAULT` (read once, on first use) names the
//! one to arm. Unset, as in every deployment, each check is one load of a cached bool.
//!
//! | `STORAGE_TEST_FAULT` | effect |
//! |---|---|
//! | `hold-after-launch-save` | the dispatcher stops for good right after saving a batch that launches, before its ACCEPT leaves: the test then SIGKILLs the process, which is the write-ahead rule's worst instant |

use std::sync::OnceLock;

const VAR: &str = "STORAGE_TEST_FAULT";

fn armed() -> Option<&'static str> {
    static FAULT: OnceLock<Option<String>> = OnceLock::new();
    FAULT
        .get_or_init(|| std::env::var(VAR).ok().filter(|v| !v.is_empty()))
        .as_deref()
}

/// True when `hold-after-launch-save` is armed.
pub fn hold_after_launch_save() -> bool {
    armed() == Some("hold-after-launch-save")
}

/// Blocks the calling thread for good, saying where (the test waits for this line).
pub fn hold(point: &str) -> ! {
    log::error!("{VAR}: holding at fault point {point}");
    loop {
        std::thread::park();
    }
}
