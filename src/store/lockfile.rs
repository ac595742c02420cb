//! The file store's writer lock: an advisory lock (flock) on `<journal>.lock` beside the
//! journal, held for the life of the store that writes.
//!
//! Two schedulers appending to one journal would interleave their batches, and one's
//! compaction would replace the file under the other's open append handle (its later
//! appends then go to the unlinked file and are lost). The lock is taken before anything is
//! written and released by the kernel when the holder's process ends, so a crashed holder
//! never blocks the next start. The file is never removed: removing it would let a third
//! process lock a new file while the second still holds the old one.

use super::StoreError;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct WriterLock {
    file: File,
}

impl WriterLock {
    /// The lock file of the journal at `journal`: `<journal>.lock` in the same directory.
    pub fn path_for(journal: &Path) -> PathBuf {
        let mut name = journal.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock without waiting, creating the file (and its private directory) when
    /// missing; a held lock is [`StoreError::Locked`] naming the holder it recorded.
    pub fn take(path: &Path, dir: &Path) -> Result<WriterLock, StoreError> {
        let io = |action| {
            move |source| StoreError::Io {
                action,
                path: path.to_path_buf(),
                source,
            }
        };
        if !dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::Io {
                    action: "create directory",
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io("open the lock file"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StoreError::Locked {
                    path: path.to_path_buf(),
                    holder: (!holder.is_empty()).then(|| holder.to_owned()),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("lock")(e)),
        }
        // Who holds it, for the error the next scheduler prints; not needed for the lock.
        let me = format!("pid {} on {}\n", std::process::id(), hostname());
        let recorded = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(me.as_bytes()));
        if let Err(e) = recorded {
            log::warn!("cannot record the holder in {}: {e}", path.display());
        }
        Ok(WriterLock { file })
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Still held here: no one else reads a half-cleared file. The kernel releases the
        // lock when the file closes.
        let _ = self.file.set_len(0);
    }
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_: io::Error| "?".into())
}
