//! A [`RecordStore`] in memory: for tests (it can be told to fail) and as the reference the
//! shared store suite is checked against. Clones share the same records, so a test keeps a
//! handle while the dispatcher owns the store.

use super::{Change, Loaded, RecordStore, StoreError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Inner {
    records: Option<BTreeMap<String, Vec<u8>>>,
    fail: bool,
    written: u64,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// While `fail` is set every write fails (a full disk, an unreachable ensemble).
    pub fn set_failing(&self, fail: bool) {
        self.lock().fail = fail;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A test that panicked while holding the lock has already failed; the data is plain.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(inner: &Inner) -> Result<(), StoreError> {
        if inner.fail {
            return Err(StoreError::Unsupported {
                what: "memory store told to fail (test)".into(),
            });
        }
        Ok(())
    }
}

impl RecordStore for MemoryStore {
    fn load_all(&mut self) -> Result<Loaded, StoreError> {
        Ok(match &self.lock().records {
            None => Loaded::Empty,
            Some(r) => Loaded::Records(r.clone()),
        })
    }

    fn apply(&mut self, batch: &[Change]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        Self::check(&inner)?;
        let mut written = 0;
        let records = inner.records.get_or_insert_with(BTreeMap::new);
        for change in batch {
            match change {
                Change::Put(k, v) => {
                    written += v.len() as u64;
                    records.insert(k.clone(), v.clone());
                }
                Change::Delete(k) => {
                    records.remove(k);
                }
            }
        }
        inner.written += written;
        Ok(())
    }

    fn replace_all(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        Self::check(&inner)?;
        inner.written += records.iter().map(|(_, v)| v.len() as u64).sum::<u64>();
        inner.records = Some(records.iter().cloned().collect());
        Ok(())
    }

    fn destroy(&mut self) -> Result<(), StoreError> {
        let mut inner = self.lock();
        Self::check(&inner)?;
        inner.records = None;
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.lock().written
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}
