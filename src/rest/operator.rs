//! The operator API: every write (`POST /api/plan/{pause,resume}`, `POST /api/nodes/<host>/...`)
//! and `GET /api/events`. A write's token is checked before anything else about it (the
//! dispatcher never sees an unauthenticated command); the dispatcher decides and answers once
//! what the command changed is saved. Writes reach this file over TLS only (`plain.rs`).

use super::http::{Request, Response};
use super::{json_value, method_not_allowed, Router, Wait};
use crate::scheduler::exchange::{Input, OperatorRequest};
use crate::scheduler::operator::{self, Command};
use crate::secret::Secret;

const TOKEN_SETTINGS: &str = "-rest.operator.token.file=<path> or the environment variable \
                              STORAGE_OPERATOR_TOKEN";

/// Whether `req` carries the operator token; the refusal otherwise. Never says how close a
/// wrong token was, never echoes it.
pub(super) fn check_token(configured: Option<&Secret>, req: &Request) -> Result<(), Response> {
    let Some(token) = configured else {
        return Err(Response::error(
            403,
            "operator API disabled",
            &format!("no operator token is configured: start the scheduler with {TOKEN_SETTINGS}"),
        ));
    };
    let unauthorized = |detail: &str| {
        Response::error(401, "unauthorized", detail)
            .with_header("WWW-Authenticate", "Bearer realm=\"operator\"")
    };
    let Some(value) = req.header("authorization") else {
        return Err(unauthorized(
            "missing credentials: send Authorization: Bearer <operator token>",
        ));
    };
    let (scheme, presented) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(unauthorized(
            "malformed credentials: expected Authorization: Bearer <operator token>",
        ));
    }
    if !token.ct_eq(presented.trim().as_bytes()) {
        return Err(unauthorized("wrong operator token"));
    }
    Ok(())
}

impl Router {
    /// `Some` when `req.path` is an operator write's path (whatever its method).
    pub(super) fn operator_route(&self, req: &Request) -> Option<Response> {
        let parsed = operator::parse(&req.path)?;
        if req.method != "POST" {
            return Some(method_not_allowed(&req.method, &["POST"]));
        }
        if let Err(refusal) = check_token(self.config.operator_token.as_ref(), req) {
            return Some(refusal);
        }
        Some(match parsed {
            Ok(command) => self.command(command),
            Err(e) => Response::error(400, "bad operator command", &e),
        })
    }

    fn command(&self, command: Command) -> Response {
        let (action, target) = (command.action(), command.target());
        let (tx, rx) = crossbeam_channel::bounded(1);
        let sent = self
            .config
            .inputs
            .send(Input::Operator(OperatorRequest { command, reply: tx }));
        let outcome = match sent {
            Ok(()) => self.wait(&rx, self.options.dispatcher_timeout),
            Err(_) => Err(Wait::Gone),
        };
        // The writer's next read shows its write (even one that timed out here may be done).
        self.views.forget();
        match outcome {
            Ok(o) => json_value(
                o.status,
                serde_json::json!({
                    "action": action,
                    "target": target,
                    "outcome": o.word(),
                    "message": o.message,
                }),
            ),
            Err(w) => w.response(),
        }
    }

    /// `GET /api/events`: newest first.
    pub(super) fn events(&self, _req: &Request) -> Response {
        match self.view() {
            Ok(v) => json_value(200, serde_json::json!({ "events": &*v.events })),
            Err(r) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>) -> Request {
        let headers = auth
            .map(|a| vec![("authorization".to_string(), a.to_string())])
            .unwrap_or_default();
        Request::new("POST", "/api/plan/pause", headers, vec![])
    }

    fn body(r: &Response) -> String {
        String::from_utf8_lossy(r.body.bytes()).into_owned()
    }

    const TOKEN: &str = "0123456789abcdef-operator";

    #[test]
    fn without_a_configured_token_writes_answer_403_naming_the_settings() {
        let r = check_token(None, &req(Some(&format!("Bearer {TOKEN}")))).unwrap_err();
        assert_eq!(r.status, 403);
        let b = body(&r);
        assert!(
            b.contains("-rest.operator.token.file") && b.contains("STORAGE_OPERATOR_TOKEN"),
            "{b}"
        );
    }

    #[test]
    fn missing_malformed_and_wrong_tokens_answer_401_without_echoing() {
        let token = Secret::new(TOKEN);
        for (auth, says) in [
            (None, "missing credentials"),
            (Some("Basic abc"), "malformed credentials"),
            (Some("Bearer"), "wrong operator token"),
            (
                Some("Bearer 0123456789abcdef-operatoR"),
                "wrong operator token",
            ),
            (
                Some("Bearer 0123456789abcdef-operator-and-more"),
                "wrong operator token",
            ),
        ] {
            let r = check_token(Some(&token), &req(auth)).unwrap_err();
            assert_eq!(r.status, 401, "{auth:?}");
            let b = body(&r);
            assert!(b.contains(says), "{auth:?}: {b}");
            assert!(!b.contains("0123456789abcdef"), "{auth:?} echoed: {b}");
        }
        let bearer = format!("Bearer {TOKEN}");
        assert!(check_token(Some(&token), &req(Some(&bearer))).is_ok());
        let lower = format!("bearer  {TOKEN} ");
        assert!(check_token(Some(&token), &req(Some(&lower))).is_ok());
    }
}
