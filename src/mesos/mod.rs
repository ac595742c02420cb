//! The Mesos v1 wire layer shared by the scheduler and the executor: messages (protobuf and
//! Mesos JSON), RecordIO framing and the HTTP client for the v1 endpoints.

pub mod base64;
pub mod client;
pub mod codec;
pub mod executor;
pub mod offers;
pub mod proto;
pub mod recordio;
pub mod scheduler;
pub mod text;
pub mod types;

pub use codec::{CodecError, Encoding};
pub use text::Str;
pub use types::*;

use std::fmt;

/// A protobuf `bytes` field; Mesos JSON carries it as standard base64.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Bytes(pub Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(v)
    }
}

impl serde::Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a base64 string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Bytes, E> {
                base64::decode(s).map(Bytes).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}
