//! The executor binary agents fetch (`GET /storage-executor`), with the SHA-256 every launch's
//! command checks the fetched file against. The REST server serves it and the dispatcher
//! names its digest: both go through the one [`ExecutorBinary`], so the digest a launch
//! carries is that of the file served.
//!
//! The file is kept open, not read into memory: a fetch over plain HTTP (the Mesos fetcher)
//! is sent from the kernel's page cache (`rest/http/write.rs`), and the digests are made once
//! per file by reading it in pieces. Held in memory, the 3 MB binary was an eighth of the
//! scheduler's memory at 10,000 agents.
//!
//! The path is looked at again on every use: another file there (an operator replacing it,
//! which renames a new file over it or rewrites it in place) is opened and hashed anew, told
//! by its inode, size and modification time. A fetch already under way goes on with the file
//! it opened, the digest of which its launch carries.

use crate::hash::ContentHasher;
use crate::sha256::Sha256;
use log::info;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

const HINT: &str = "it is served from beside the scheduler binary, or from -executor.altpath";

pub struct ExecutorBinary {
    path: PathBuf,
    open: Mutex<Option<Binary>>,
}

/// One file as opened: what is served and its digests.
#[derive(Clone)]
pub struct Binary {
    pub file: Arc<File>,
    pub len: u64,
    pub etag: String,
    sha256: String,
    id: FileId,
}

impl Binary {
    /// The SHA-256 of the file served, lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// What tells another file at the path from the one opened.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

impl ExecutorBinary {
    pub fn new(path: PathBuf) -> Self {
        ExecutorBinary {
            path,
            open: Mutex::new(None),
        }
    }

    /// The SHA-256 of the file as it would be served now (every launch asks).
    pub fn sha256(&self) -> Result<String, String> {
        self.get().map(|b| b.sha256)
    }

    /// The file to serve now, opened and hashed when it is not the one opened before.
    pub fn get(&self) -> Result<Binary, String> {
        let shown = self.path.display();
        let failed = |e: std::io::Error| format!("{shown}: {e}; {HINT}");
        let meta = std::fs::metadata(&self.path).map_err(failed)?;
        if !meta.is_file() {
            return Err(format!("{shown} is not a regular file; {HINT}"));
        }
        // Held while hashing, so that a crowd of fetchers hashes a new file once.
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = open.as_ref().filter(|b| b.id == FileId::of(&meta)) {
            return Ok(b.clone());
        }
        let file = File::open(&self.path).map_err(failed)?;
        // What was opened, which may already differ from what was looked at.
        let id = FileId::of(&file.metadata().map_err(failed)?);
        let (mut fast, mut sha) = (ContentHasher::default(), Sha256::default());
        let mut buf = vec![0u8; 64 * 1024];
        let mut at = 0u64;
        while at < id.len {
            let n = file.read_at(&mut buf, at).map_err(failed)?;
            if n == 0 {
                return Err(format!(
                    "{shown}: {at} bytes read of {}: the file shrank while read; {HINT}",
                    id.len
                ));
            }
            fast.update(&buf[..n]);
            sha.update(&buf[..n]);
            at += n as u64;
        }
        let etag = format!("\"{:016x}-{:x}\"", fast.finish(), id.len);
        info!("executor binary {shown}: {} bytes, ETag {etag}", id.len);
        let b = Binary {
            file: Arc::new(file),
            len: id.len,
            etag,
            sha256: sha.hex(),
            id,
        };
        *open = Some(b.clone());
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::content_hash;
    use crate::sha256;

    fn contents(b: &Binary) -> Vec<u8> {
        let mut out = vec![0u8; b.len as usize];
        b.file.read_exact_at(&mut out, 0).unwrap();
        out
    }

    /// One file opened for every fetch, its digests made once; a file renamed over it or
    /// rewritten in place is another, and a fetch under way keeps the one it has.
    #[test]
    fn the_file_is_opened_and_hashed_once_until_another_takes_its_place() {
        let dir = std::env::temp_dir().join(format!("exe-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("storage-executor");
        std::fs::write(&path, b"executor v1").unwrap();
        let b = ExecutorBinary::new(path.clone());
        let digest = b.sha256().unwrap();
        assert_eq!(digest, sha256::hex(b"executor v1"));
        let fetch = b.get().unwrap();
        let again = b.get().unwrap();
        assert!(Arc::ptr_eq(&fetch.file, &again.file), "opened again");
        assert_eq!(
            fetch.etag,
            format!("\"{:016x}-b\"", content_hash(b"executor v1"))
        );
        assert_eq!(contents(&fetch), b"executor v1");

        // An operator's replacement: a new file renamed over the old one.
        let new = dir.join("storage-executor.new");
        std::fs::write(&new, b"executor v2, longer").unwrap();
        std::fs::rename(&new, &path).unwrap();
        let replaced = b.get().unwrap();
        assert_eq!(replaced.sha256(), sha256::hex(b"executor v2, longer"));
        assert_ne!(replaced.etag, fetch.etag);
        assert_eq!(contents(&replaced), b"executor v2, longer");
        // The fetch that began before it sends the file its launch's digest names.
        assert_eq!(contents(&fetch), b"executor v1");

        // Rewritten in place, to the same length: its modification time tells.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"executor V2, longer").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(modified + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(b.sha256().unwrap(), sha256::hex(b"executor V2, longer"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
