//! Lists read back from JSON (the journal at a restart) held at their length.
//!
//! serde grows a vector as it reads it, and the first item already makes room for four: a
//! node's one-device list kept room for three more paths (72 bytes), and a node's polled
//! storage with one device room for three more device states (192 bytes). A restarted
//! scheduler reads 10,000 nodes at once, and that room was about 3 MB of its peak, then the
//! figure closest to the app's `mem: 32` (a first start builds these lists at their length:
//! `gateway_work/poll.rs`, `dispatcher/executor_api.rs`).

use serde::{Deserialize, Deserializer};

/// `#[serde(deserialize_with = "exact::vec")]`: the list, its spare room given back.
pub fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v = Vec::<T>::deserialize(d)?;
    v.shrink_to_fit();
    Ok(v)
}
