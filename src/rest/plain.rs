//! What plain HTTP may still reach on a server that also serves TLS: reads of what the
//! scheduler shows anyone (`/health`, `/metrics`, `/api/state`, `/api/health`, `/api/plan`, the page, the executor
//! binary). The executor API (plans carry passwords, calls carry executor secrets, reports
//! steer the scheduler) and every write are refused before the request's body is read, so
//! neither reaches the dispatcher. Pure: the server's gate calls it.

use super::http::{Request, Response};
use crate::contract::api;

/// The answer for a plain-HTTP request that needs TLS, else `None`.
pub(super) fn refusal(req: &Request) -> Option<Response> {
    if req.is_tls() {
        return None;
    }
    let read = matches!(req.method.as_str(), "GET" | "HEAD");
    if read && !req.path.starts_with(api::PREFIX) {
        return None;
    }
    let target: String = req.path.chars().take(200).collect();
    let method: String = req.method.chars().take(20).collect();
    Some(Response::error(
        403,
        "https required",
        &format!(
            "this endpoint needs https: {method} {target} is served over TLS only (https:// on \
             this same port)"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(method: &str, path: &str, tls: bool) -> Option<u16> {
        let req = Request::new(method, path, vec![], vec![]);
        let req = if tls { req.over_tls() } else { req };
        refusal(&req).map(|r| r.status)
    }

    #[test]
    fn plain_http_reaches_reads_only_and_never_the_executor_api() {
        for path in [
            "/health",
            "/metrics",
            "/api/state",
            "/api/health",
            "/api/plan",
            "/",
            "/storage-executor",
        ] {
            assert_eq!(status("GET", path, false), None, "{path}");
            assert_eq!(status("HEAD", path, false), None, "{path}");
        }
        for action in api::ROUTES {
            let path = api::path("storage-executor.h.1", action.action);
            assert_eq!(status(action.method.as_str(), &path, false), Some(403));
            assert_eq!(status(action.method.as_str(), &path, true), None);
        }
        // A write to any path, known or not yet.
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            assert_eq!(status(method, "/api/state", false), Some(403), "{method}");
            assert_eq!(status(method, "/api/anything", true), None, "{method}");
        }
        let req = Request::new("POST", "/api/v1/executors/e1/phase", vec![], vec![]);
        let body = String::from_utf8(refusal(&req).unwrap().body.bytes().to_vec()).unwrap();
        assert!(
            body.contains("this endpoint needs https")
                && body.contains("/api/v1/executors/e1/phase"),
            "{body}"
        );
    }
}
