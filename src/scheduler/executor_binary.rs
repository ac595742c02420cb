//! The executor binary agents fetch (`GET /storage-executor`), read once and kept in memory,
//! with the SHA-256 every launch's command checks the fetched file against. The REST server
//! serves it and the dispatcher names its digest: both hold the one [`ExecutorBinary`], so
//! the digest a launch carries is that of the bytes served.

use crate::hash::content_hash;
use crate::sha256;
use log::info;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// Read again only when it was missing or its size or modification time changed (an
/// operator replacing the file under a running scheduler).
pub struct ExecutorBinary {
    path: PathBuf,
    cached: Mutex<Option<Arc<Binary>>>,
}

pub struct Binary {
    pub bytes: Arc<Vec<u8>>,
    pub etag: String,
    /// Made on the first launch that needs it, not on the fetchers' path.
    sha256: OnceLock<String>,
    len: u64,
    modified: Option<SystemTime>,
}

impl Binary {
    /// The SHA-256 of the bytes served, lower-case hex.
    pub fn sha256(&self) -> &str {
        self.sha256.get_or_init(|| sha256::hex(&self.bytes))
    }
}

impl ExecutorBinary {
    pub fn new(path: PathBuf) -> Self {
        ExecutorBinary {
            path,
            cached: Mutex::new(None),
        }
    }

    pub fn get(&self) -> Result<Arc<Binary>, String> {
        let shown = self.path.display();
        let hint = "it is served from beside the scheduler binary, or from -executor.altpath";
        let meta = std::fs::metadata(&self.path).map_err(|e| format!("{shown}: {e}; {hint}"))?;
        if !meta.is_file() {
            return Err(format!("{shown} is not a regular file; {hint}"));
        }
        let (len, modified) = (meta.len(), meta.modified().ok());
        // Held while reading, so that a crowd of fetchers reads the file once, not each.
        let mut slot = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = slot.as_ref() {
            if b.len == len && b.modified == modified {
                return Ok(b.clone());
            }
        }
        let bytes = std::fs::read(&self.path).map_err(|e| format!("{shown}: {e}; {hint}"))?;
        let etag = format!("\"{:016x}-{:x}\"", content_hash(&bytes), bytes.len());
        info!(
            "executor binary {shown}: {} bytes loaded, ETag {etag}",
            bytes.len()
        );
        let b = Arc::new(Binary {
            bytes: Arc::new(bytes),
            etag,
            sha256: OnceLock::new(),
            len,
            modified,
        });
        *slot = Some(b.clone());
        Ok(b)
    }
}
