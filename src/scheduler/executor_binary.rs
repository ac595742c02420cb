//! The executor binary agents fetch (`GET /storage-executor`), with the SHA-256 every launch's
//! command checks the fetched file against. The REST server serves it and the dispatcher
//! names its digest: both go through the one [`ExecutorBinary`], so the digest a launch
//! carries is that of the bytes served.
//!
//! The bytes stay in memory only while a fetch holds them: a crowd of fetchers shares one
//! copy, and between launch waves the scheduler keeps only the digest and the ETag. Kept for
//! good, the 3 MB binary was an eighth of the scheduler's memory at 10,000 agents.
//!
//! A file of the size and modification time last read is taken to hold the same bytes: read
//! again for a fetch, it is not hashed again. (Hashing every re-read, 27 MB in a debug
//! build, made fetches slow enough to delay executors into a scheduler restart in a test.)
//! An operator replacing the file changes its modification time; a file rewritten in place
//! within the same nanosecond to the same size is served with the old digest, and the
//! executor's check of that digest refuses it.

use crate::hash::{content_hash, ContentHasher};
use crate::sha256::{self, Sha256};
use log::info;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

const HINT: &str = "it is served from beside the scheduler binary, or from -executor.altpath";

/// Read again when no fetch holds the bytes, or when the file's size or modification time
/// changed (an operator replacing the file under a running scheduler).
pub struct ExecutorBinary {
    path: PathBuf,
    known: Mutex<Option<Known>>,
}

/// What is kept of the file last read.
struct Known {
    len: u64,
    modified: Option<SystemTime>,
    etag: String,
    sha256: String,
    bytes: Weak<Vec<u8>>,
}

pub struct Binary {
    pub bytes: Arc<Vec<u8>>,
    pub etag: String,
    sha256: String,
}

impl Binary {
    /// The SHA-256 of the bytes served, lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

impl ExecutorBinary {
    pub fn new(path: PathBuf) -> Self {
        ExecutorBinary {
            path,
            known: Mutex::new(None),
        }
    }

    fn stat(&self) -> Result<(u64, Option<SystemTime>), String> {
        let shown = self.path.display();
        let meta = std::fs::metadata(&self.path).map_err(|e| format!("{shown}: {e}; {HINT}"))?;
        if !meta.is_file() {
            return Err(format!("{shown} is not a regular file; {HINT}"));
        }
        Ok((meta.len(), meta.modified().ok()))
    }

    /// The SHA-256 of the file as it would be served now, without reading it while its size
    /// and modification time are those of the last read (every launch asks). A new file is
    /// hashed as it is read, not held: the first launch needs the digest long before any
    /// fetch needs the bytes (held, they were the scheduler's peak at 100 agents).
    pub fn sha256(&self) -> Result<String, String> {
        let (len, modified) = self.stat()?;
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = known.as_ref() {
            if k.len == len && k.modified == modified {
                return Ok(k.sha256.clone());
            }
        }
        let (read, etag, sha256) = self.digests()?;
        *known = Some(Known {
            len: read,
            modified,
            etag,
            sha256: sha256.clone(),
            bytes: Weak::new(),
        });
        Ok(sha256)
    }

    /// The ETag of new content of `len` bytes whose [`content_hash`] is `hash`, logged.
    fn new_etag(&self, hash: u64, len: u64) -> String {
        let etag = format!("\"{hash:016x}-{len:x}\"");
        info!(
            "executor binary {}: {len} bytes, ETag {etag}",
            self.path.display()
        );
        etag
    }

    /// The file's length, ETag and SHA-256, read in pieces.
    fn digests(&self) -> Result<(u64, String, String), String> {
        use std::io::Read;
        let shown = self.path.display();
        let failed = |e: std::io::Error| format!("{shown}: {e}; {HINT}");
        let mut file = std::fs::File::open(&self.path).map_err(failed)?;
        let (mut fast, mut sha, mut len) = (ContentHasher::default(), Sha256::default(), 0u64);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(failed)?;
            if n == 0 {
                break;
            }
            fast.update(&buf[..n]);
            sha.update(&buf[..n]);
            len += n as u64;
        }
        Ok((len, self.new_etag(fast.finish(), len), sha.hex()))
    }

    pub fn get(&self) -> Result<Binary, String> {
        let (len, modified) = self.stat()?;
        // Held while reading, so that a crowd of fetchers reads the file once, not each.
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let same_file = |k: &&Known| k.len == len && k.modified == modified;
        if let Some(k) = known.as_ref().filter(same_file) {
            if let Some(bytes) = k.bytes.upgrade() {
                return Ok(Binary {
                    bytes,
                    etag: k.etag.clone(),
                    sha256: k.sha256.clone(),
                });
            }
        }
        let shown = self.path.display();
        let bytes = std::fs::read(&self.path).map_err(|e| format!("{shown}: {e}; {HINT}"))?;
        // The same file read again (no fetch held it): its digests are known.
        let same = known
            .as_ref()
            .filter(|k| same_file(k) && bytes.len() as u64 == k.len);
        let (etag, sha256) = match same {
            Some(k) => (k.etag.clone(), k.sha256.clone()),
            None => {
                let etag = self.new_etag(content_hash(&bytes), bytes.len() as u64);
                (etag, sha256::hex(&bytes))
            }
        };
        let bytes = Arc::new(bytes);
        *known = Some(Known {
            len,
            modified,
            etag: etag.clone(),
            sha256: sha256.clone(),
            bytes: Arc::downgrade(&bytes),
        });
        Ok(Binary {
            bytes,
            etag,
            sha256,
        })
    }

    #[cfg(test)]
    fn held(&self) -> bool {
        let known = self.known.lock().unwrap();
        known.as_ref().is_some_and(|k| k.bytes.strong_count() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &std::path::Path, bytes: &[u8]) -> PathBuf {
        let path = dir.join("storage-executor");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The bytes live as long as a fetch holds them, and no longer; the digest and ETag stay,
    /// and a read of the same content again gives the same.
    #[test]
    fn the_bytes_are_held_only_while_a_fetch_holds_them() {
        let dir = std::env::temp_dir().join(format!("exe-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let b = ExecutorBinary::new(file(&dir, b"executor v1"));
        let digest = b.sha256().unwrap();
        assert_eq!(digest, sha256::hex(b"executor v1"));
        assert!(!b.held(), "kept after the digest was made");
        let fetch = b.get().unwrap();
        // Hashed as read or from the bytes held: the same digests.
        let fresh = ExecutorBinary::new(b.path.clone()).get().unwrap();
        assert_eq!(
            (fresh.etag.as_str(), fresh.sha256()),
            (fetch.etag.as_str(), digest.as_str())
        );
        drop(fresh);
        let again = b.get().unwrap();
        assert!(
            Arc::ptr_eq(&fetch.bytes, &again.bytes),
            "one copy for a crowd"
        );
        assert!(b.held());
        let etag = fetch.etag.clone();
        drop((fetch, again));
        assert!(!b.held(), "kept after the last fetch ended");
        let later = b.get().unwrap();
        assert_eq!(
            (later.etag.as_str(), later.sha256()),
            (etag.as_str(), digest.as_str())
        );
        assert_eq!(later.bytes.as_slice(), b"executor v1");
        drop(later);

        // Not hashed again when read again: a file of the same size and modification time
        // is taken for the same (here it is not, to show that no hash was made).
        let modified = std::fs::metadata(b.path.clone())
            .unwrap()
            .modified()
            .unwrap();
        let path = file(&dir, b"executor V1");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        let reread = b.get().unwrap();
        assert_eq!(reread.bytes.as_slice(), b"executor V1");
        assert_eq!(
            (reread.etag.as_str(), reread.sha256()),
            (etag.as_str(), digest.as_str())
        );
        drop(reread);

        file(&dir, b"executor v2, longer");
        let new = b.get().unwrap();
        assert_eq!(new.sha256(), sha256::hex(b"executor v2, longer"));
        assert_ne!(new.etag, etag);
        assert_eq!(b.sha256().unwrap(), new.sha256());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
