//! Where the scheduler keeps its state, as the flags (`-store.type`, `-store.uri`) say.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub kind: StoreKind,
    pub uri: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    File,
    /// Recognised so the error can say "not yet" rather than "unknown"; never produced by
    /// `flags::parse` until the ZooKeeper store exists.
    ZooKeeper,
}
