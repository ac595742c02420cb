//! Request heads: where a head ends, the request line and header lines, and what the
//! headers say about the body; anything malformed becomes a [`Refusal`].

use super::{Response, MAX_HEADERS};

/// Why a request could not be read: answered with this status (or the gate's `answer`)
/// and the connection closed.
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) error: &'static str,
    pub(super) detail: String,
    pub(super) answer: Option<Response>,
}

pub(super) fn refuse(status: u16, error: &'static str, detail: impl Into<String>) -> Refusal {
    Refusal {
        status,
        error,
        detail: detail.into(),
        answer: None,
    }
}

/// End of the head (after the blank line), searching from `from`. Bare LF line ends are
/// accepted as well as CRLF.
pub(super) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            match buf.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

pub(super) struct Head {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) query: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) content_length: usize,
    pub(super) expect_continue: bool,
    pub(super) keep_alive: bool,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn bad_request(detail: String) -> Refusal {
    refuse(400, "bad request", detail)
}

pub(super) fn parse_head(raw: &[u8]) -> Result<Head, Refusal> {
    let text = std::str::from_utf8(raw)
        .map_err(|_| bad_request("the request head is not valid UTF-8".into()))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = request_line(lines.next().unwrap_or(""))?;
    let headers = header_lines(lines)?;
    let (path, query) = line.target.split_once('?').unwrap_or((line.target, ""));
    let connection = headers
        .iter()
        .filter(|(n, _)| n == "connection")
        .map(|(_, v)| v.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(",");
    let keep_alive = if line.http10 {
        connection.contains("keep-alive")
    } else {
        !connection.contains("close")
    };
    Ok(Head {
        method: line.method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        content_length: content_length(&headers)?,
        expect_continue: expect_continue(&headers)?,
        headers,
        keep_alive,
    })
}

struct RequestLine<'a> {
    method: &'a str,
    target: &'a str,
    http10: bool,
}

/// `METHOD /target HTTP/1.x`.
fn request_line(line: &str) -> Result<RequestLine<'_>, Refusal> {
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(bad_request(format!(
            "malformed request line {:?}",
            line.chars().take(200).collect::<String>()
        )));
    };
    if !is_token(method) {
        return Err(bad_request(format!("malformed method {method:?}")));
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        v if v.starts_with("HTTP/") => {
            return Err(refuse(
                505,
                "HTTP version not supported",
                format!("{v} is not supported; use HTTP/1.1"),
            ))
        }
        v => return Err(bad_request(format!("malformed HTTP version {v:?}"))),
    };
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad_request(format!(
            "request target {:?} is not an absolute path",
            target.chars().take(200).collect::<String>()
        )));
    }
    Ok(RequestLine {
        method,
        target,
        http10,
    })
}

/// The header lines up to the blank one, names lowercased. Header lines are never echoed
/// into errors (or the log): a mangled one may hold credentials.
fn header_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, Refusal> {
    let mut headers = Vec::with_capacity(8);
    for (i, l) in lines.enumerate() {
        if l.is_empty() {
            break;
        }
        if l.starts_with(' ') || l.starts_with('\t') {
            return Err(bad_request("folded header lines are not accepted".into()));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad_request(format!("header line {} has no colon", i + 1)));
        };
        if !is_token(name) {
            return Err(bad_request(format!(
                "header line {} has a malformed name (spaces or other characters not allowed in a header name)",
                i + 1
            )));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        if headers.len() > MAX_HEADERS {
            return Err(refuse(
                431,
                "too many headers",
                format!("at most {MAX_HEADERS} headers are accepted"),
            ));
        }
    }
    Ok(headers)
}

/// The body's length: `Content-Length` only (no chunked bodies), all copies agreeing.
fn content_length(headers: &[(String, String)]) -> Result<usize, Refusal> {
    if headers.iter().any(|(n, _)| n == "transfer-encoding") {
        return Err(refuse(
            411,
            "length required",
            "request bodies must be sent with Content-Length (Transfer-Encoding is not supported)",
        ));
    }
    let mut content_length: Option<usize> = None;
    for (_, v) in headers.iter().filter(|(n, _)| n == "content-length") {
        let n = v
            .parse::<u64>()
            .ok()
            .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad_request(format!("malformed Content-Length {v:?}")))?;
        // Anything beyond the limit is refused the same way; saturate rather than overflow.
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if content_length.is_some_and(|c| c != n) {
            return Err(bad_request("conflicting Content-Length headers".into()));
        }
        content_length = Some(n);
    }
    Ok(content_length.unwrap_or(0))
}

/// `Expect: 100-continue` is the only expectation met.
fn expect_continue(headers: &[(String, String)]) -> Result<bool, Refusal> {
    match headers.iter().find(|(n, _)| n == "expect") {
        None => Ok(false),
        Some((_, v)) if v.eq_ignore_ascii_case("100-continue") => Ok(true),
        Some((_, v)) => Err(refuse(
            417,
            "expectation failed",
            format!("Expect: {v:?} is not supported"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::http::MAX_BODY;

    #[test]
    fn head_end_accepts_crlf_and_lf() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn parses_a_head() {
        let h =
            parse_head(b"POST /a/b?x=1 HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
                .ok()
                .unwrap();
        assert_eq!(
            (h.method.as_str(), h.path.as_str(), h.query.as_str()),
            ("POST", "/a/b", "x=1")
        );
        assert_eq!(h.content_length, 5);
        assert!(!h.keep_alive);
        let h = parse_head(b"GET / HTTP/1.0\r\n\r\n").ok().unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn refuses_bad_heads() {
        for (raw, status) in [
            (&b"GET /\r\n\r\n"[..], 400),
            (b"GET / HTTP/2.0\r\n\r\n", 505),
            (b"GET http://x/ HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                411,
            ),
            (b"POST / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417),
        ] {
            match parse_head(raw) {
                Ok(_) => panic!("accepted {:?}", String::from_utf8_lossy(raw)),
                Err(r) => assert_eq!(
                    r.status,
                    status,
                    "{:?}: {}",
                    String::from_utf8_lossy(raw),
                    r.detail
                ),
            }
        }
    }

    #[test]
    fn huge_content_length_saturates() {
        let h = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n");
        // Beyond u64: malformed, not a panic.
        assert!(h.is_err());
        let h = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n")
            .ok()
            .unwrap();
        assert!(h.content_length > MAX_BODY);
    }
}
