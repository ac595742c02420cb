//! Decode errors that name the field path from the outermost message to the failure.

use super::MAX_DEPTH;
use std::fmt;

/// Why a protobuf message could not be decoded, with the path of fields leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The outermost message being decoded.
    root: &'static str,
    /// Field names from the failing field outwards.
    fields: Vec<&'static str>,
    /// The innermost message, where the problem sits.
    message: &'static str,
    kind: DecodeErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The bytes are not a well-formed protobuf encoding (truncation, bad varint, bad UTF-8).
    Malformed(String),
    /// A `required` field was absent.
    MissingField(&'static str),
    /// Messages nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl DecodeError {
    pub(super) fn new(kind: DecodeErrorKind) -> Self {
        DecodeError {
            root: "",
            fields: Vec::new(),
            message: "",
            kind,
        }
    }

    pub(super) fn malformed(why: impl Into<String>) -> Self {
        Self::new(DecodeErrorKind::Malformed(why.into()))
    }

    /// Adds the field through which the failing value was reached.
    pub(super) fn within(mut self, field: &'static str) -> Self {
        self.fields.push(field);
        self
    }

    /// Called as the error leaves each message: the first call names the innermost message,
    /// the last the outermost.
    pub(super) fn leaving(mut self, message: &'static str) -> Self {
        if self.message.is_empty() {
            self.message = message;
        }
        self.root = message;
        self
    }

    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.root)?;
        for field in self.fields.iter().rev() {
            write!(f, ".{field}")?;
        }
        match &self.kind {
            DecodeErrorKind::Malformed(why) => write!(f, ": malformed protobuf: {why}")?,
            DecodeErrorKind::MissingField(field) => {
                write!(f, ": required field `{field}` missing")?
            }
            DecodeErrorKind::TooDeep => write!(f, ": nested deeper than {MAX_DEPTH} messages")?,
        }
        if self.message != self.root {
            write!(f, " (in {})", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}
