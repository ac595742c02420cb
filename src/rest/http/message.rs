//! What a handler sees and answers: the parsed request, the response and its body, and a
//! connection handed over to answer later.

use super::HttpStats;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

pub struct Request {
    pub method: String,
    /// Path without the query, still percent-encoded.
    pub path: String,
    pub query: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub(super) keep_alive: bool,
    /// Whether it came over TLS.
    pub(super) tls: bool,
}

/// Method, path and header names only: header values carry credentials (Authorization),
/// bodies carry reports.
impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        write!(
            f,
            "Request {{ {} {}, headers: {names:?}, {} body bytes }}",
            self.method,
            self.path,
            self.body.len()
        )
    }
}

impl Request {
    /// The first header of that name (give it in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `Accept-Encoding` allows gzip (not refused with `q=0`).
    pub fn accepts_gzip(&self) -> bool {
        self.header("accept-encoding").is_some_and(|v| {
            v.split(',').any(|item| {
                let mut parts = item.split(';');
                let coding = parts.next().unwrap_or("").trim();
                (coding.eq_ignore_ascii_case("gzip") || coding == "*")
                    && !parts.any(|p| {
                        p.trim()
                            .strip_prefix("q=")
                            .and_then(|q| q.trim().parse::<f32>().ok())
                            .is_some_and(|q| q == 0.0)
                    })
            })
        })
    }

    /// A query parameter, percent-decoded; `Err` when its encoding is broken.
    pub fn query_param(&self, name: &str) -> Result<Option<String>, String> {
        for pair in self.query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if percent_decode(k).as_deref() == Ok(name) {
                return percent_decode(&v.replace('+', " ")).map(Some);
            }
        }
        Ok(None)
    }

    /// Whether the request came over TLS (and so was neither read nor alterable on the way).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The same request as if it had come over TLS, for tests of the handlers.
    pub fn over_tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// For building requests in tests of the handlers.
    pub fn new(method: &str, target: &str, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers,
            body,
            keep_alive: true,
            tls: false,
        }
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8.
pub fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

pub enum Body {
    Empty,
    Static(&'static [u8]),
    Owned(Vec<u8>),
    /// Shared by many responses (the state JSON): never copied.
    Shared(Arc<dyn AsRef<[u8]> + Send + Sync>),
    /// The first `len` bytes of a file (the executor binary): sent from the kernel's page
    /// cache on a plain connection, never read into the scheduler's memory; read when it
    /// must be (a TLS connection, an answer handed over).
    File {
        file: Arc<std::fs::File>,
        len: u64,
    },
}

impl Body {
    /// The bytes of a body held in memory; a [`Body::File`]'s are not (see [`Body::size`] and
    /// [`Body::contents`]).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Empty | Body::File { .. } => &[],
            Body::Static(b) => b,
            Body::Owned(b) => b,
            Body::Shared(b) => (**b).as_ref(),
        }
    }

    /// Its length in bytes, a file's too.
    pub fn size(&self) -> u64 {
        match self {
            Body::File { len, .. } => *len,
            other => other.bytes().len() as u64,
        }
    }

    /// Its bytes, a file's read (the slow path).
    pub fn contents(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        use std::os::unix::fs::FileExt;
        match self {
            Body::File { file, len } => {
                let mut out = vec![0u8; usize::try_from(*len).map_err(std::io::Error::other)?];
                file.read_exact_at(&mut out, 0)?;
                Ok(out.into())
            }
            other => Ok(other.bytes().into()),
        }
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
    /// Set for an answer that comes later (a plan long poll): the worker hands the
    /// connection to this and is free at once; the receiver answers through [`Later`].
    pub later: Option<Box<dyn FnOnce(Later) + Send>>,
}

/// A connection whose answer comes later, held by whoever answers it (not by a worker).
pub struct Later {
    pub(super) stream: TcpStream,
    pub(super) tls: Option<Box<rustls::ServerConnection>>,
    pub(super) head_only: bool,
    pub(super) stats: Arc<HttpStats>,
    pub(super) write_timeout: Duration,
    pub(super) closer: super::closer::Closer,
    /// Takes the connection back for the client's next request once the answer is sent
    /// whole (an executor's next plan poll follows at once: no new TLS handshake each time);
    /// `None`: closed after the answer.
    pub(super) keep: Option<super::Resume>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: Body) -> Response {
        Response {
            status,
            // Room for the headers most answers get, so that adding them does not reallocate.
            headers: {
                let mut h = Vec::with_capacity(6);
                h.push(("Content-Type", content_type.to_owned()));
                h
            },
            body,
            later: None,
        }
    }

    /// An answer that comes later: `hand_over` receives the connection.
    pub fn later(hand_over: impl FnOnce(Later) + Send + 'static) -> Response {
        Response {
            later: Some(Box::new(hand_over)),
            ..Response::new(200, "application/json", Body::Empty)
        }
    }

    pub fn json(status: u16, body: Vec<u8>) -> Response {
        Response::new(status, "application/json", Body::Owned(body))
    }

    /// The JSON error shape of every non-HTML error: `{"error": ..., "detail": ...}`.
    pub fn error(status: u16, error: &str, detail: &str) -> Response {
        let body = serde_json::json!({ "error": error, "detail": detail }).to_string();
        Response::json(status, body.into_bytes())
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_a_request_shows_no_header_value_or_body() {
        let r = Request::new(
            "POST",
            "/api/v1/executors/x/phase",
            vec![("authorization".into(), "Bearer s3cret-token".into())],
            b"{\"error\":\"private\"}".to_vec(),
        );
        let shown = format!("{r:?}");
        assert!(
            shown.contains("authorization") && shown.contains("/phase"),
            "{shown}"
        );
        assert!(
            !shown.contains("s3cret") && !shown.contains("private"),
            "{shown}"
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb").unwrap(), "a/b");
        assert!(percent_decode("a%zz").is_err());
        assert!(percent_decode("a%").is_err());
        assert!(percent_decode("%ff").is_err());
        let ae = |v: &str| {
            Request::new(
                "GET",
                "/",
                vec![("accept-encoding".into(), v.into())],
                vec![],
            )
        };
        assert!(ae("gzip, deflate, br").accepts_gzip());
        assert!(ae("br;q=1.0, GZIP;q=0.5").accepts_gzip());
        assert!(ae("*").accepts_gzip());
        assert!(!ae("gzip;q=0").accepts_gzip());
        assert!(!ae("identity").accepts_gzip());
        assert!(!Request::new("GET", "/", vec![], vec![]).accepts_gzip());
        let r = Request::new("GET", "/p?version=12&wait=3&x=%41", vec![], vec![]);
        assert_eq!(r.query_param("version").unwrap().as_deref(), Some("12"));
        assert_eq!(r.query_param("x").unwrap().as_deref(), Some("A"));
        assert_eq!(r.query_param("none").unwrap(), None);
    }
}
