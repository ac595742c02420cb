//! The wire tap (`MasterConfig::wire_tap`): every scheduler and executor Call body the
//! master and agents accept is written, as received, to a file of the tap directory, so that
//! a test can hand what a real framework sent to `protoc` and the official protos.
//!
//! Files are `<seq>.<scheduler|executor>.<pb|json>`, `seq` counting every tapped call of
//! this process in arrival order (zero-padded, so a directory listing sorts).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Writes one accepted call body; a tap that cannot write logs and drops the copy (the
/// call itself is served either way).
pub(super) fn record(dir: Option<&Path>, api: &str, content_type: &str, body: &[u8]) {
    let Some(dir) = dir else { return };
    let ext = if content_type == "application/x-protobuf" {
        "pb"
    } else {
        "json"
    };
    let seq = SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let path = dir.join(format!("{seq:08}.{api}.{ext}"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, body)) {
        log::warn!("wire tap: cannot write {}: {e}", path.display());
    }
}
