//! One place that turns typed Calls into request bodies and response bodies into typed
//! Events, for either encoding Mesos speaks.

use crate::mesos::proto::{DecodeError, Message};
use serde::{de::DeserializeOwned, Serialize};
use std::fmt;
use std::str::FromStr;

/// The encoding of request bodies and of the event stream (`-mesos.encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Protobuf,
    Json,
}

impl Encoding {
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }

    pub fn encode<M: Message + Serialize>(self, m: &M) -> Vec<u8> {
        match self {
            Encoding::Protobuf => m.encode(),
            // Serializing these plain structs cannot fail: no maps with non-string keys,
            // no non-finite floats are produced by serde_json (they become null).
            Encoding::Json => serde_json::to_vec(m).unwrap_or_default(),
        }
    }

    pub fn decode<M: Message + DeserializeOwned>(self, body: &[u8]) -> Result<M, CodecError> {
        match self {
            Encoding::Protobuf => M::decode(body).map_err(CodecError::Protobuf),
            Encoding::Json => {
                // One check of the whole body: from a `&str` serde_json takes each string as
                // it is, where from bytes it checked every string again (a sixth of a JSON
                // event's decode).
                let json = |error: String| CodecError::Json {
                    message: M::NAME,
                    error,
                };
                let text =
                    std::str::from_utf8(body).map_err(|e| json(format!("not UTF-8: {e}")))?;
                serde_json::from_str(text).map_err(|e| json(e.to_string()))
            }
        }
    }
}

impl FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "protobuf" | "proto" => Ok(Encoding::Protobuf),
            "json" => Ok(Encoding::Json),
            other => Err(format!("unknown encoding {other:?} (protobuf or json)")),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encoding::Protobuf => "protobuf",
            Encoding::Json => "json",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    Protobuf(DecodeError),
    Json {
        message: &'static str,
        error: String,
    },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Protobuf(e) => write!(f, "{e}"),
            CodecError::Json { message, error } => write!(f, "{message}: invalid JSON: {error}"),
        }
    }
}

impl std::error::Error for CodecError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::FrameworkID;

    #[test]
    fn json_is_read_from_text_and_a_body_that_is_not_utf8_is_refused_by_name() {
        let body = "{\"value\":\"f-\\u00e9é\"}";
        let id: FrameworkID = Encoding::Json.decode(body.as_bytes()).unwrap();
        assert_eq!(&*id.value, "f-éé");
        // A bad byte inside a string, after valid text: the body's check refuses it, as
        // serde_json's check of each string did.
        let err = Encoding::Json
            .decode::<FrameworkID>(b"{\"value\":\"f-\xff\"}")
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("mesos.FrameworkID: invalid JSON: not UTF-8"),
            "{text}"
        );
        assert!(text.contains("index 12"), "{text}");
        // A malformed body that is text gets serde_json's error, with its place.
        let err = Encoding::Json
            .decode::<FrameworkID>(b"{\"value\":")
            .unwrap_err();
        assert!(err.to_string().contains("line 1 column 9"), "{err}");
    }
}
