//! `GET /storage-executor`: the binary agents fetch, served from memory.

use crate::hash::content_hash;
use log::info;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The executor binary, read once and served from memory; read again only when it was
/// missing or its size or modification time changed.
pub(super) struct ExecutorBinary {
    path: PathBuf,
    cached: Mutex<Option<Arc<Binary>>>,
}

pub(super) struct Binary {
    pub(super) bytes: Arc<Vec<u8>>,
    pub(super) etag: String,
    len: u64,
    modified: Option<SystemTime>,
}

impl ExecutorBinary {
    pub(super) fn new(path: PathBuf) -> Self {
        ExecutorBinary {
            path,
            cached: Mutex::new(None),
        }
    }

    pub(super) fn get(&self) -> Result<Arc<Binary>, String> {
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
            len,
            modified,
        });
        *slot = Some(b.clone());
        Ok(b)
    }
}
