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
            Encoding::Json => serde_json::from_slice(body).map_err(|e| CodecError::Json {
                message: M::NAME,
                error: e.to_string(),
            }),
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
