//! Where the scheduler keeps its state, as the flags (`-store.type`, `-store.uri`) say, and the
//! flags around it (framework adoption, store helpers).

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub kind: StoreKind,
    pub uri: String,
    /// `-store.type` or `-store.uri` was given: no discovery through the master's `zk` flag.
    pub explicit: bool,
    /// `-store.dump`, `-store.delete`, `-store.import`: do that and exit.
    pub helper: Option<StoreHelper>,
    /// `-framework.id`: adopt this framework when nothing is stored.
    pub adopt_id: Option<String>,
    /// `-framework.new`: register anew even beside an active framework of the same name.
    pub force_new: bool,
    /// `-framework.guard=false`: register without looking for an active framework of the
    /// same name (for masters whose framework list cannot be read).
    pub skip_guard: bool,
}

impl StoreSettings {
    pub fn new(kind: StoreKind, uri: impl Into<String>) -> StoreSettings {
        StoreSettings {
            kind,
            uri: uri.into(),
            explicit: true,
            helper: None,
            adopt_id: None,
            force_new: false,
            skip_guard: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    File,
    ZooKeeper,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHelper {
    Dump,
    Delete { yes: bool },
    Import(PathBuf),
}
