//! The executor binary agents fetch (`GET /storage-executor.gz`, or `GET /storage-executor`),
//! with the SHA-256 every launch's command checks the fetched file against. The REST server
//! serves it and the dispatcher names its digest: both go through the one [`ExecutorBinary`],
//! so the digest a launch carries is that of the file served.
//!
//! The file is kept open, not read into memory: a fetch over plain HTTP (the Mesos fetcher)
//! is sent from the kernel's page cache (`rest/http/write.rs`), and the digests are made once
//! per file by reading it in pieces. Held in memory, the 3 MB binary was an eighth of the
//! scheduler's memory at 10,000 agents.
//!
//! Launches fetch it gzipped, which the Mesos fetcher unpacks (`extract`: a bare `.gz` goes
//! through `gunzip`): at 10,000 agents a rollout sends half of the 30 GB it sent plain, from
//! one scheduler host, and sends it again at every upgrade. The gzip copy is made from the
//! opened file into an unnamed file in the sandbox (`MESOS_SANDBOX`): its pages are page cache
//! on disk, which the kernel may take back, not memory counted against the app's `mem` (a tmpfs
//! `/tmp` would hold them). When it cannot be made, launches fetch the plain file.
//!
//! The digests and the gzip copy are made apart ([`Binary::gzipped`]): the digest names the
//! start's target, which every announcement and plan after a restart waits for, while only a
//! fetch or a launch needs the copy, and gzipping 3 MB takes 150 ms (hashing it, 5 ms). So a
//! start hashes at once and gzips on a thread of its own; a fetch or launch that comes first
//! waits for that one copy.
//!
//! The path is looked at again on every use: another file there (an operator replacing it,
//! which renames a new file over it or rewrites it in place) is opened and hashed anew, told
//! by its inode, size and modification time. A fetch already under way goes on with the file
//! it opened, the digest of which its launch carries.

use crate::hash::ContentHasher;
use crate::sha256::Sha256;
use log::{info, warn};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

const HINT: &str = "it is served from beside the scheduler binary, or from -executor.altpath";

pub struct ExecutorBinary {
    path: PathBuf,
    open: Mutex<Option<Binary>>,
}

/// One file as opened: what is served and its digests.
#[derive(Clone)]
pub struct Binary {
    pub plain: Served,
    /// The same bytes gzipped, made once by whoever asks first ([`Binary::gzipped`]); `None`
    /// inside when the copy could not be made.
    gz: Arc<OnceLock<Option<Served>>>,
    /// The fast content hash the ETags are made of.
    hash: u64,
    sha256: String,
    id: FileId,
    /// The path it was opened at, for the log.
    shown: Arc<str>,
}

/// A file served as it is, with its ETag.
#[derive(Clone)]
pub struct Served {
    pub file: Arc<File>,
    pub len: u64,
    pub etag: String,
}

impl Binary {
    /// The SHA-256 of the file served, lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The same bytes gzipped, when the copy can be made: made by the first caller, while
    /// any other waits for it (`OnceLock`), so that one file is gzipped once.
    pub fn gzipped(&self) -> Option<&Served> {
        self.gz
            .get_or_init(|| match gzip_copy(&self.plain.file, self.plain.len) {
                Ok((file, len)) => {
                    let etag = format!("\"{:016x}-{:x}-gz{len:x}\"", self.hash, self.plain.len);
                    info!(
                        "executor binary {}: {} bytes, ETag {etag}; {len} bytes gzipped",
                        self.shown, self.plain.len
                    );
                    Some(Served {
                        file: Arc::new(file),
                        len,
                        etag,
                    })
                }
                Err(e) => {
                    warn!(
                        "executor binary {}: {} bytes, ETag {}; launches fetch it as it is \
                         (twice the bytes): no gzip copy: {e}",
                        self.shown, self.plain.len, self.plain.etag
                    );
                    None
                }
            })
            .as_ref()
    }

    /// Whether the gzip copy was made already (or found impossible).
    #[cfg(test)]
    fn gzip_settled(&self) -> bool {
        self.gz.get().is_some()
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
        read_pieces(&file, id.len, |piece| {
            fast.update(piece);
            sha.update(piece);
        })
        .map_err(|e| format!("{shown}: {e}; {HINT}"))?;
        let hash = fast.finish();
        let b = Binary {
            plain: Served {
                file: Arc::new(file),
                len: id.len,
                etag: format!("\"{hash:016x}-{:x}\"", id.len),
            },
            gz: Arc::default(),
            hash,
            sha256: sha.hex(),
            id,
            shown: shown.to_string().into(),
        };
        *open = Some(b.clone());
        Ok(b)
    }
}

/// At start: hashes the binary now, and makes its gzip copy on a thread of its own, which
/// ends with it. A binary that cannot be read is told of here, and again at every launch.
pub fn prepare(binary: &ExecutorBinary) {
    match binary.get() {
        Ok(b) => {
            let spawned = std::thread::Builder::new()
                .name("executor-gzip".into())
                .spawn(move || {
                    b.gzipped();
                });
            if let Err(e) = spawned {
                warn!("executor binary: its gzip copy waits for the first fetch: {e}");
            }
        }
        Err(e) => warn!("{e}"),
    }
}

/// Where the gzip copy goes: the task's sandbox, on disk (see the module's comment).
fn sandbox() -> PathBuf {
    std::env::var_os("MESOS_SANDBOX")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// Hands the first `len` bytes of `file` to `take`, a piece at a time.
fn read_pieces(file: &File, len: u64, mut take: impl FnMut(&[u8])) -> Result<(), String> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = 0u64;
    while at < len {
        let n = file.read_at(&mut buf, at).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!(
                "{at} bytes read of {len}: the file shrank while read"
            ));
        }
        take(&buf[..n]);
        at += n as u64;
    }
    Ok(())
}

/// The first `len` bytes of `file` gzipped into an unnamed file in the sandbox, and its length.
fn gzip_copy(file: &File, len: u64) -> Result<(File, u64), String> {
    let mut gz = Gzip::start(&sandbox());
    read_pieces(file, len, |piece| gz.write(piece)).map_err(|e| format!("cannot read it: {e}"))?;
    gz.finish()
}

/// The gzip copy as it is written; the first error ends it (the plain file is served).
struct Gzip(Result<flate2::write::GzEncoder<File>, String>);

impl Gzip {
    fn start(dir: &Path) -> Gzip {
        let level = flate2::Compression::default();
        Gzip(
            unnamed_file(dir)
                .map(|f| flate2::write::GzEncoder::new(f, level))
                .map_err(|e| format!("cannot make an unnamed file in {}: {e}", dir.display())),
        )
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Ok(enc) = &mut self.0 {
            if let Err(e) = enc.write_all(bytes) {
                self.0 = Err(format!("cannot write it: {e}"));
            }
        }
    }

    fn finish(self) -> Result<(File, u64), String> {
        let file = self
            .0?
            .finish()
            .map_err(|e| format!("cannot write it: {e}"))?;
        let len = file
            .metadata()
            .map_err(|e| format!("cannot read its size: {e}"))?
            .len();
        Ok((file, len))
    }
}

/// A file with no name in `dir`, gone when the last handle closes. `O_TMPFILE` where the
/// filesystem has it, else a name taken and removed at once.
fn unnamed_file(dir: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut open = std::fs::OpenOptions::new();
    open.read(true).write(true).mode(0o600);
    if let Ok(f) = open.clone().custom_flags(libc::O_TMPFILE).open(dir) {
        return Ok(f);
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(".storage-executor.gz.{}.{n}", std::process::id()));
    let f = open.create_new(true).open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::content_hash;
    use crate::sha256;

    /// A directory of this test process's own, `prefix`ed, holding `storage-executor`
    /// ("executor v1"): the directory and the file.
    fn executor_v1(prefix: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("storage-executor");
        std::fs::write(&path, b"executor v1").unwrap();
        (dir, path)
    }

    fn contents(b: &Binary) -> Vec<u8> {
        let mut out = vec![0u8; b.plain.len as usize];
        b.plain.file.read_exact_at(&mut out, 0).unwrap();
        out
    }

    /// One file opened for every fetch, its digests made once; a file renamed over it or
    /// rewritten in place is another, and a fetch under way keeps the one it has.
    #[test]
    fn the_file_is_opened_and_hashed_once_until_another_takes_its_place() {
        let (dir, path) = executor_v1("exe-bin");
        let b = ExecutorBinary::new(path.clone());
        let digest = b.sha256().unwrap();
        assert_eq!(digest, sha256::hex(b"executor v1"));
        let fetch = b.get().unwrap();
        let again = b.get().unwrap();
        assert!(
            Arc::ptr_eq(&fetch.plain.file, &again.plain.file),
            "opened again"
        );
        assert_eq!(
            fetch.plain.etag,
            format!("\"{:016x}-b\"", content_hash(b"executor v1"))
        );
        assert_eq!(contents(&fetch), b"executor v1");

        // An operator's replacement: a new file renamed over the old one.
        let new = dir.join("storage-executor.new");
        std::fs::write(&new, b"executor v2, longer").unwrap();
        std::fs::rename(&new, &path).unwrap();
        let replaced = b.get().unwrap();
        assert_eq!(replaced.sha256(), sha256::hex(b"executor v2, longer"));
        assert_ne!(replaced.plain.etag, fetch.plain.etag);
        assert_eq!(contents(&replaced), b"executor v2, longer");
        // The fetch that began before it sends the file its launch's digest names.
        assert_eq!(contents(&fetch), b"executor v1");

        // The gzip copy is of the file it was made with: what `gunzip` (the Mesos
        // fetcher's, for a bare `.gz`) makes of it is that file.
        let gunzipped = |b: &Binary| {
            let gz = b.gzipped().expect("a gzip copy");
            let mut bytes = vec![0u8; gz.len as usize];
            gz.file.read_exact_at(&mut bytes, 0).unwrap();
            let mut child = std::process::Command::new("gunzip")
                .args(["-d", "-c"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("gunzip");
            child.stdin.take().unwrap().write_all(&bytes).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "gunzip: {}", out.status);
            (out.stdout, gz.etag.clone())
        };
        let (v1, v1_etag) = gunzipped(&fetch);
        let (v2, v2_etag) = gunzipped(&replaced);
        assert_eq!(v1, b"executor v1");
        assert_eq!(v2, b"executor v2, longer");
        assert!(
            v1_etag != v2_etag && v1_etag != fetch.plain.etag,
            "{v1_etag} {v2_etag}"
        );

        // Rewritten in place, to the same length: its modification time tells.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"executor V2, longer").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(modified + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(b.sha256().unwrap(), sha256::hex(b"executor V2, longer"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The digest is there before the gzip copy is made, and the copy is made once, by
    /// whoever asks first (`prepare`'s thread at start), for every holder of the file.
    #[test]
    fn the_digest_does_not_wait_for_the_gzip_copy_and_the_copy_is_made_once() {
        let (dir, path) = executor_v1("exe-gz");
        let b = ExecutorBinary::new(path);
        let first = b.get().unwrap();
        assert_eq!(first.sha256(), sha256::hex(b"executor v1"));
        assert!(!first.gzip_settled(), "gzipped while hashing");

        prepare(&b);
        let later = b.get().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !later.gzip_settled() {
            assert!(std::time::Instant::now() < deadline, "no gzip copy");
            std::thread::yield_now();
        }
        let (made, again) = (first.gzipped().unwrap(), later.gzipped().unwrap());
        assert!(Arc::ptr_eq(&made.file, &again.file), "gzipped twice");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// No place for the gzip copy: the plain file is served, and the reason told.
    #[test]
    fn without_a_place_for_the_gzip_copy_the_plain_file_is_served() {
        let mut gz = Gzip::start(Path::new("/nonexistent-sandbox"));
        gz.write(b"executor");
        let e = gz.finish().expect_err("no copy");
        assert!(e.contains("/nonexistent-sandbox"), "{e}");
    }
}
