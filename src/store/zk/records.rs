//! Reading and writing the records: fenced `multi` writes split under the request limit
//! (root record first), and the [`RecordStore`] implementation on top of them.

use super::wire::{self, code, op, Dec, Enc};
use super::{unescape, Session, ZkStore};
use crate::store::{node_key, Change, Loaded, RecordStore, StoreError, ROOT_KEY};
use std::collections::BTreeMap;

/// Below ZooKeeper's default 1 MB request limit with room for headers.
const MAX_MULTI_BYTES: usize = 512 * 1024;

impl ZkStore {
    fn multi(&mut self, s: &mut Session, ops: &[(i32, Vec<u8>, String)]) -> Result<(), StoreError> {
        let mut e = Enc::default();
        for (t, body, _) in ops {
            e.int(*t).boolean(false).int(-1);
            e.0.extend_from_slice(body);
        }
        e.int(-1).boolean(true).int(-1);
        let r = self.call(s, op::MULTI, &e.0)?;
        let mut d = Dec::new(&r.body);
        let mut results = Vec::new();
        let mut failed = None;
        let bad = |e| StoreError::Io {
            action: "read a multi reply from",
            path: self.describe().into(),
            source: e,
        };
        loop {
            let t = d.int().map_err(bad)?;
            let done = d.boolean().map_err(bad)?;
            let err = d.int().map_err(bad)?;
            if done {
                break;
            }
            match t {
                op::CREATE => {
                    d.string().map_err(bad)?;
                    results.push(Some(0));
                }
                op::SET_DATA => results.push(Some(d.stat().map_err(bad)?.version)),
                -1 => {
                    let code = d.int().map_err(bad)?;
                    if code != code::OK && failed.is_none() {
                        failed = Some((results.len(), code));
                    }
                    results.push(None);
                }
                _ => results.push(None),
            }
            let _ = err;
        }
        if let Some((i, c)) = failed.or((r.err != code::OK).then_some((0, r.err))) {
            let what = ops.get(i).map(|o| o.2.as_str()).unwrap_or("?");
            if matches!(c, code::BAD_VERSION | code::NODE_EXISTS | code::NO_NODE) {
                return Err(self.fenced(
                    s,
                    format!("{what} was changed by someone else ({}); another scheduler writes this state", wire::code_name(c)),
                ));
            }
            return Err(self.zk_err(&format!("write {what}"), c));
        }
        for ((t, _, key), v) in ops.iter().zip(results) {
            match (*t, v) {
                (op::DELETE, _) => {
                    self.versions.remove(key);
                }
                (_, Some(v)) if key == ROOT_KEY => {
                    s.epoch = Some(v);
                    self.versions.insert(key.clone(), v);
                }
                (_, Some(v)) => {
                    self.versions.insert(key.clone(), v);
                }
                _ => {}
            }
        }
        self.written += e.0.len() as u64;
        Ok(())
    }

    fn op_put(&self, key: &str, value: &[u8]) -> (i32, Vec<u8>, String) {
        let path = self.path_of(key);
        let mut e = Enc::default();
        match self.versions.get(key) {
            Some(v) => {
                e.string(&path).buf(value).int(*v);
                (op::SET_DATA, e.0, key.to_owned())
            }
            None => {
                e.string(&path).buf(value).acl(&self.acl_of(&path)).int(0);
                (op::CREATE, e.0, key.to_owned())
            }
        }
    }
}

impl RecordStore for ZkStore {
    fn load_all(&mut self) -> Result<Loaded, StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader {
            self.take_lock(s, true)?;
        }
        self.start_pinger();
        self.adopt_open_znodes(s)?;
        self.versions.clear();
        let root = self.get(s, &self.path_of(ROOT_KEY))?;
        let Some((root_bytes, root_version)) = root else {
            s.epoch = None;
            return Ok(Loaded::Empty);
        };
        // Take over: bump the epoch, so a stale leader's next write fails.
        let mut e = Enc::default();
        e.string(&self.path_of(ROOT_KEY))
            .buf(&root_bytes)
            .int(root_version);
        let r = self.call(s, op::SET_DATA, &e.0)?;
        if r.err != code::OK {
            return Err(self.fenced(
                s,
                format!("cannot take over the state ({})", wire::code_name(r.err)),
            ));
        }
        let v = Dec::new(&r.body)
            .stat()
            .map_err(|e| self.io_err("read", e))?
            .version;
        s.epoch = Some(v);
        self.versions.insert(ROOT_KEY.into(), v);
        let mut records = BTreeMap::new();
        records.insert(ROOT_KEY.to_owned(), root_bytes);
        let nodes = format!("{}/nodes", self.base);
        for name in self.children(s, &nodes)? {
            if let Some((data, v)) = self.get(s, &format!("{nodes}/{name}"))? {
                let key = node_key(&unescape(&name));
                self.versions.insert(key.clone(), v);
                records.insert(key, data);
            }
        }
        Ok(Loaded::Records(records))
    }

    fn apply(&mut self, batch: &[Change]) -> Result<(), StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader && s.epoch.is_none() && s.fenced.is_none() {
            self.take_lock(s, true)?;
            self.start_pinger();
        }
        if s.epoch.is_none() {
            self.ensure_path(s, &format!("{}/nodes", self.base))?;
        }
        // Root first (see the module docs), then nodes, in parts under the request limit.
        let mut ops = Vec::new();
        let root_put = batch
            .iter()
            .find(|c| matches!(c, Change::Put(k, _) if k == ROOT_KEY));
        match root_put {
            Some(Change::Put(k, v)) => ops.push(self.op_put(k, v)),
            _ => {
                let mut e = Enc::default();
                e.string(&self.path_of(ROOT_KEY)).int(s.epoch.unwrap_or(-1));
                ops.push((op::CHECK, e.0, ROOT_KEY.to_owned()));
            }
        }
        let mut size = ops[0].1.len();
        for c in batch {
            let o = match c {
                Change::Put(k, _) if k == ROOT_KEY => continue,
                Change::Put(k, v) => self.op_put(k, v),
                Change::Delete(k) => {
                    if !self.versions.contains_key(k) {
                        continue;
                    }
                    let mut e = Enc::default();
                    e.string(&self.path_of(k)).int(self.versions[k]);
                    (op::DELETE, e.0, k.clone())
                }
            };
            if size + o.1.len() > MAX_MULTI_BYTES && ops.len() > 1 {
                self.multi(s, &ops)?;
                ops.clear();
                let mut e = Enc::default();
                e.string(&self.path_of(ROOT_KEY)).int(s.epoch.unwrap_or(-1));
                ops.push((op::CHECK, e.0, ROOT_KEY.to_owned()));
                size = ops[0].1.len();
            }
            size += o.1.len();
            ops.push(o);
        }
        self.multi(s, &ops)
    }

    fn replace_all(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), StoreError> {
        let keep: std::collections::HashSet<&str> =
            records.iter().map(|(k, _)| k.as_str()).collect();
        let mut batch: Vec<Change> = self
            .versions
            .keys()
            .filter(|k| !keep.contains(k.as_str()))
            .map(|k| Change::Delete(k.clone()))
            .collect();
        batch.extend(
            records
                .iter()
                .map(|(k, v)| Change::Put(k.clone(), v.clone())),
        );
        if !records.iter().any(|(k, _)| k == ROOT_KEY) {
            // Nothing to hold the epoch: keep an empty-state root rather than none.
            return Err(StoreError::Unsupported {
                what: format!("{}: a replacement without a root record", self.describe()),
            });
        }
        self.apply(&batch)
    }

    fn destroy(&mut self) -> Result<(), StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader {
            self.take_lock(s, true)?;
        }
        let nodes = format!("{}/nodes", self.base);
        let mut paths: Vec<String> = self
            .children(s, &nodes)?
            .into_iter()
            .map(|n| format!("{nodes}/{n}"))
            .collect();
        paths.push(nodes);
        paths.push(self.path_of(ROOT_KEY));
        for p in paths {
            let mut e = Enc::default();
            e.string(&p).int(-1);
            let c = self.call(s, op::DELETE, &e.0)?.err;
            if c != code::OK && c != code::NO_NODE {
                return Err(self.zk_err(&format!("delete {p}"), c));
            }
        }
        self.versions.clear();
        s.epoch = None;
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }

    fn describe(&self) -> String {
        format!(
            "zookeeper zk://{}{}{}",
            self.shown_user,
            self.hosts.join(","),
            self.base
        )
    }
}
