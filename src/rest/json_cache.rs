//! JSON bodies made once and shared, and their gzip forms for clients that accept them.

use super::http::{Body, Request, Response};
use serde::Serialize;
use std::sync::{Arc, OnceLock};

/// A value's JSON and its gzip form, each made at most once and then shared (the
/// `/api/state` body of one view, asked for by many clients).
#[derive(Clone, Default)]
pub struct JsonCache {
    plain: OnceLock<Result<Arc<Vec<u8>>, String>>,
    gzip: OnceLock<Result<Arc<Vec<u8>>, String>>,
}

impl JsonCache {
    pub fn get_or_encode<T: Serialize>(&self, value: &T) -> Result<Arc<Vec<u8>>, String> {
        self.get_or_make(|| serde_json::to_vec(value).map_err(|e| e.to_string()))
    }

    pub fn get_or_encode_gzip<T: Serialize>(&self, value: &T) -> Result<Arc<Vec<u8>>, String> {
        self.get_or_make_gzip(|| serde_json::to_vec(value).map_err(|e| e.to_string()))
    }

    /// The JSON `make` makes, made at most once.
    pub fn get_or_make(
        &self,
        make: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<Arc<Vec<u8>>, String> {
        self.get_or_make_shared(|| make().map(Arc::new))
    }

    /// The same, for JSON that `make` shares with others (a render kept for the next one).
    pub fn get_or_make_shared(
        &self,
        make: impl FnOnce() -> Result<Arc<Vec<u8>>, String>,
    ) -> Result<Arc<Vec<u8>>, String> {
        self.plain.get_or_init(make).clone()
    }

    /// Its gzip form, made at most once (from the JSON, made if needed).
    pub fn get_or_make_gzip(
        &self,
        make: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<Arc<Vec<u8>>, String> {
        self.gzip
            .get_or_init(|| gzip(&self.get_or_make(make)?).map(Arc::new))
            .clone()
    }
}

#[cfg(test)]
impl JsonCache {
    /// Whether the JSON and its gzip form were made.
    pub fn made(&self) -> (bool, bool) {
        (self.plain.get().is_some(), self.gzip.get().is_some())
    }
}

/// Responses smaller than this are not worth compressing.
pub(super) const GZIP_MIN: usize = 1024;

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    // Level 1: repetitive JSON and HTML shrink about as well as at higher levels, at a
    // fraction of the time, which the first request after each change waits for.
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 8 + 64),
        flate2::Compression::fast(),
    );
    e.write_all(bytes)
        .and_then(|_| e.finish())
        .map_err(|e| format!("gzip: {e}"))
}

/// Compresses a successful text response for a client that accepts gzip.
pub(super) fn compress(req: &Request, mut resp: Response) -> Response {
    let text = resp.headers.iter().any(|(n, v)| {
        *n == "Content-Type" && (v.starts_with("text/") || v.starts_with("application/json"))
    });
    if resp.status != 200
        || !text
        || resp.body.bytes().len() < GZIP_MIN
        || resp.headers.iter().any(|(n, _)| *n == "Content-Encoding")
    {
        return resp;
    }
    resp.headers.push(("Vary", "Accept-Encoding".into()));
    if !req.accepts_gzip() {
        return resp;
    }
    match gzip(resp.body.bytes()) {
        Ok(z) => {
            resp.body = Body::Owned(z);
            resp.with_header("Content-Encoding", "gzip")
        }
        Err(_) => resp,
    }
}

impl std::fmt::Debug for JsonCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.plain.get() {
            Some(Ok(b)) => write!(f, "JsonCache({} bytes)", b.len()),
            Some(Err(e)) => write!(f, "JsonCache(error: {e})"),
            None => f.write_str("JsonCache(empty)"),
        }
    }
}
