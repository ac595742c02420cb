//! A [`Store`] in one local file, replaced atomically on every save.
//!
//! Save = write `.<name>.tmp` beside the target, fsync it, rename it over the target, fsync
//! the directory. rename(2) within one directory is atomic, so a crash at any point leaves
//! either the old file or the new one; the two fsyncs make that true across a power loss too
//! (data before the rename, the rename itself before we report success). A temporary file left
//! behind by a crash is never read and is removed on the next load or save.

use super::{Store, StoreError};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The state holds the framework id and the cluster layout: readable by the owner only.
const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    temp: PathBuf,
    dir: PathBuf,
}

impl FileStore {
    /// Checks only the shape of `path`; the file and its directory are created on first save.
    pub fn new(path: impl AsRef<Path>) -> Result<FileStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let name = match path.file_name() {
            Some(name) if !path.as_os_str().to_string_lossy().ends_with('/') => name.to_owned(),
            _ => {
                return Err(StoreError::Unsupported {
                    what: format!(
                        "store path {} does not name a file (-store.uri)",
                        path.display()
                    ),
                })
            }
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(&name);
        temp_name.push(".tmp");
        Ok(FileStore {
            temp: dir.join(temp_name),
            path,
            dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory the file is saved in (created on the first save).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a save writes before the rename (exposed for tests and for operators' docs).
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Removes what an interrupted save left behind. Not fatal: the leftover is never read,
    /// and a save that cannot replace it reports its own error.
    pub(super) fn remove_stray_temp(&self) {
        match fs::remove_file(&self.temp) {
            Ok(()) => log::warn!(
                "removed {} left behind by an interrupted save; {} is unaffected",
                self.temp.display(),
                self.path.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("cannot remove leftover {}: {e}", self.temp.display()),
        }
    }

    fn io(&self, action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }

    /// Writes and flushes the temporary file; removes it again if anything after its creation
    /// fails. When creation itself fails, whatever occupies the path is left for the operator.
    fn write_temp(&self, write: &mut Writes<'_>) -> Result<(), StoreError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&self.temp)
            .map_err(self.io("create temporary file", &self.temp))?;
        let written = write(&file)
            .map_err(self.io("write temporary file", &self.temp))
            .and_then(|()| {
                file.sync_all()
                    .map_err(self.io("flush temporary file", &self.temp))
            });
        if written.is_err() {
            drop(file);
            let _ = fs::remove_file(&self.temp);
        }
        written
    }
}

impl Store for FileStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        self.remove_stray_temp();
        match fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("read", &self.path)(e)),
        }
    }

    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        self.save_with(&mut |mut f| f.write_all(state))
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

/// Writes a whole new state into the (new, empty) file it is given.
pub type Writes<'a> = dyn FnMut(&File) -> io::Result<()> + 'a;

impl FileStore {
    /// Replaces the file by what `write` writes, as [`Store::save`] does: the state is
    /// written as it is made, never held whole (the journal's compaction at
    /// 10,000 nodes is megabytes).
    pub fn save_with(&mut self, write: &mut Writes<'_>) -> Result<(), StoreError> {
        if !self.dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(&self.dir)
                .map_err(self.io("create directory", &self.dir))?;
        }
        // create_new below refuses an existing file, so a stale temp (or one with a wider mode
        // from an older run) never receives the new state.
        self.remove_stray_temp();
        self.write_temp(write)?;
        if let Err(e) = fs::rename(&self.temp, &self.path) {
            let _ = fs::remove_file(&self.temp);
            return Err(self.io("replace", &self.path)(e));
        }
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(self.io("flush directory", &self.dir))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{decode_versioned, encode_versioned, load_versioned, save_versioned};
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory per test (tests run in parallel), removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "storage-store-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o700));
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    #[test]
    fn missing_file_loads_as_nothing() {
        let dir = TempDir::new();
        let mut store = FileStore::new(dir.0.join("state.json")).expect("path");
        assert_eq!(store.load().expect("load"), None);
        assert_eq!(
            load_versioned::<Vec<u32>>(&mut store, 1).expect("load"),
            None
        );
    }

    #[test]
    fn round_trip_and_replace() {
        let dir = TempDir::new();
        let path = dir.0.join("nested/deeper/state.json");
        let mut store = FileStore::new(&path).expect("path");
        store.save(b"first").expect("save 1");
        assert_eq!(store.load().expect("load"), Some(b"first".to_vec()));
        store
            .save(b"second, longer than the first")
            .expect("save 2");
        assert_eq!(
            store.load().expect("load"),
            Some(b"second, longer than the first".to_vec())
        );
        store.save(b"3").expect("save 3");
        // A fresh store on the same path (a restarted scheduler) sees the last save.
        let mut again = FileStore::new(&path).expect("path");
        assert_eq!(again.load().expect("load"), Some(b"3".to_vec()));
        assert!(
            !store.temp_path().exists(),
            "temp file must not survive a save"
        );
        assert_eq!(store.describe(), format!("file {}", path.display()));
    }

    #[test]
    fn versioned_round_trip_through_a_file() {
        let dir = TempDir::new();
        let mut store = FileStore::new(dir.0.join("s.json")).expect("path");
        save_versioned(&mut store, 4, &vec![1u32, 2, 3]).expect("save");
        let back: Option<Vec<u32>> = load_versioned(&mut store, 4).expect("load");
        assert_eq!(back, Some(vec![1, 2, 3]));
    }

    #[test]
    fn file_is_private_and_parent_is_created() {
        let dir = TempDir::new();
        let path = dir.0.join("made/by/save/state.json");
        let mut store = FileStore::new(&path).expect("path");
        store.save(b"x").expect("save");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.0.join("made/by/save")), 0o700);
        // Even when the old file was world-readable, the replacement is not.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        store.save(b"y").expect("save");
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn relative_path_uses_current_directory() {
        let store = FileStore::new("state.json").expect("path");
        assert_eq!(store.temp_path(), Path::new("./.state.json.tmp"));
    }

    #[test]
    fn path_without_file_name_is_refused() {
        for bad in ["/", "/var/lib/", "dir/.."] {
            let err = FileStore::new(bad).expect_err(bad);
            assert!(err.to_string().contains("-store.uri"), "{err}");
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn corrupt_file_is_an_error_naming_the_path() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        fs::write(&path, b"{ this is not json").expect("write");
        let mut store = FileStore::new(&path).expect("path");
        let err = load_versioned::<Vec<u32>>(&mut store, 1).expect_err("corrupt");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("not valid JSON"), "{text}");
        // Never a silent reset: the damaged file is still there for the operator.
        assert_eq!(fs::read(&path).expect("read"), b"{ this is not json");
    }

    #[test]
    fn truncated_file_is_an_error() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        let mut store = FileStore::new(&path).expect("path");
        save_versioned(&mut store, 1, &vec!["a".to_string(); 20]).expect("save");
        let full = fs::read(&path).expect("read");
        fs::write(&path, &full[..full.len() * 2 / 3]).expect("truncate");
        let err = load_versioned::<Vec<String>>(&mut store, 1).expect_err("truncated");
        let text = err.to_string();
        assert!(text.contains("truncated"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    #[test]
    fn unknown_version_in_file_is_an_error() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        let mut store = FileStore::new(&path).expect("path");
        save_versioned(&mut store, 9, &0u8).expect("save");
        let err = load_versioned::<u8>(&mut store, 1).expect_err("version 9");
        let text = err.to_string();
        assert!(text.contains("version 9"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    #[test]
    fn stray_temp_from_a_crash_is_ignored_and_cleaned() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        let mut store = FileStore::new(&path).expect("path");
        store
            .save(&encode_versioned(1, &"committed"))
            .expect("save");
        // A crash after writing the temp file but before the rename.
        fs::write(store.temp_path(), b"half-writ").expect("stray");
        let mut restarted = FileStore::new(&path).expect("path");
        let bytes = restarted.load().expect("load").expect("state present");
        assert_eq!(
            decode_versioned::<String>(&bytes, 1).expect("decode"),
            "committed"
        );
        assert!(
            !restarted.temp_path().exists(),
            "stray temp must be removed"
        );
        // And a save after a crash that left a temp behind works too.
        fs::write(restarted.temp_path(), b"again").expect("stray");
        restarted.save(&encode_versioned(1, &"next")).expect("save");
        let bytes = restarted.load().expect("load").expect("state present");
        assert_eq!(
            decode_versioned::<String>(&bytes, 1).expect("decode"),
            "next"
        );
    }

    #[test]
    fn failed_temp_write_keeps_the_old_state() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        let mut store = FileStore::new(&path).expect("path");
        store.save(b"old").expect("save");
        // A directory where the temp file must go makes the write fail even for root.
        fs::create_dir(store.temp_path()).expect("block temp path");
        let err = store.save(b"new").expect_err("temp write must fail");
        assert!(
            err.to_string()
                .contains(&store.temp_path().display().to_string()),
            "{err}"
        );
        assert_eq!(fs::read(&path).expect("read"), b"old");
        fs::remove_dir(store.temp_path()).expect("unblock");
        store.save(b"new").expect("save after unblocking");
        assert_eq!(fs::read(&path).expect("read"), b"new");
    }

    #[test]
    fn read_only_directory_keeps_the_old_state() {
        let dir = TempDir::new();
        let path = dir.0.join("state.json");
        let mut store = FileStore::new(&path).expect("path");
        store.save(b"old").expect("save");
        fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o500)).expect("chmod");
        // Root ignores directory permissions; then this case cannot be produced here (the
        // blocked-temp-path test above covers the same guarantee).
        let probe = dir.0.join("probe");
        if fs::write(&probe, b"").is_ok() {
            let _ = fs::remove_file(&probe);
            eprintln!("skipped: running as root, a read-only directory is still writable");
            return;
        }
        let err = store.save(b"new").expect_err("read-only dir");
        assert!(err.to_string().contains("temporary file"), "{err}");
        fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(fs::read(&path).expect("read"), b"old");
    }
}
