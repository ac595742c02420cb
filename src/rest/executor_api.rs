//! The executor API's HTTP side: routing an executor's call by the contract's route table,
//! its credentials, its plan long poll, and the answer to the dispatcher's reply. What a call
//! means is decided by the dispatcher (`scheduler/dispatcher/executor_api.rs`).

use super::http::{self, Request, Response};
use super::{json_value, method_not_allowed, not_found, unauthorized, Router};
use crate::contract::api::{self, Action};
use crate::scheduler::exchange::{
    ApiError, ExecutorCall, ExecutorReply, ExecutorRequest, Input, PlanAsk,
};
use crate::secret::Secret;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Router {
    pub(super) fn executor_route(&self, req: &Request, rest: &str) -> Response {
        let Some((raw_id, action)) = rest.split_once('/') else {
            return not_found(&req.path);
        };
        let id = match http::percent_decode(raw_id) {
            Ok(id) if !id.is_empty() && !id.contains('/') => id,
            Ok(_) => return not_found(&req.path),
            Err(e) => return Response::error(400, "bad executor id", &e),
        };
        let Some(action) = Action::from_segment(action) else {
            return Response::error(
                404,
                "not found",
                &format!(
                    "unknown executor endpoint {:?}; expected {}",
                    action.chars().take(100).collect::<String>(),
                    api::segments_listed()
                ),
            );
        };
        let allowed = action.allowed_methods();
        if !allowed.contains(&req.method.as_str()) {
            return method_not_allowed(&req.method, allowed);
        }
        // Credentials first: a body from a caller without them is never parsed.
        let secret = match bearer(req) {
            Ok(s) => s,
            Err(r) => return r,
        };
        let parsed = match action {
            Action::Plan => self.plan_params(req),
            Action::Phase => report(ExecutorCall::phase_from_json(&req.body)),
            Action::Devices => report(ExecutorCall::devices_from_json(&req.body)),
            Action::Heartbeat => report(ExecutorCall::heartbeat_from_json(&req.body)),
            Action::Health => report(ExecutorCall::health_from_json(&req.body)),
            Action::Rollout => report(ExecutorCall::rollout_from_json(&req.body)),
        };
        let (call, wait) = match parsed {
            Ok(p) => p,
            Err(r) => return r,
        };
        self.executor_call(id, secret, call, wait)
    }

    fn plan_params(&self, req: &Request) -> Result<(ExecutorCall, Duration), Response> {
        let bad = |name: &str, e: String| {
            Response::error(400, "bad query parameter", &format!("{name}: {e}"))
        };
        let version = match req
            .query_param(api::PLAN_VERSION_PARAM)
            .map_err(|e| bad(api::PLAN_VERSION_PARAM, e))?
        {
            None => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                bad(
                    api::PLAN_VERSION_PARAM,
                    format!("{v:?} is not a plan version (a whole number)"),
                )
            })?),
        };
        let wait = match req
            .query_param(api::PLAN_WAIT_PARAM)
            .map_err(|e| bad(api::PLAN_WAIT_PARAM, e))?
        {
            None => Duration::ZERO,
            Some(w) => Duration::from_secs(w.parse::<u64>().map_err(|_| {
                bad(
                    api::PLAN_WAIT_PARAM,
                    format!("{w:?} is not a number of seconds"),
                )
            })?),
        }
        .min(self.options.max_wait);
        let nudge = match req
            .query_param(api::PLAN_NUDGE_PARAM)
            .map_err(|e| bad(api::PLAN_NUDGE_PARAM, e))?
            .as_deref()
        {
            None | Some("0") => false,
            Some("1") => true,
            Some(n) => {
                return Err(bad(
                    api::PLAN_NUDGE_PARAM,
                    format!("{n:?} is neither 1 nor 0"),
                ))
            }
        };
        if nudge && (version.is_none() || !wait.is_zero()) {
            return Err(bad(
                api::PLAN_NUDGE_PARAM,
                format!(
                    "a nudge is asked with the {} held and no {}: it replaces the wait",
                    api::PLAN_VERSION_PARAM,
                    api::PLAN_WAIT_PARAM
                ),
            ));
        }
        Ok((
            ExecutorCall::Plan(PlanAsk {
                version,
                wait_ms: wait.as_millis() as u64,
                nudge,
            }),
            wait,
        ))
    }

    fn executor_call(
        &self,
        id: String,
        secret: Secret,
        call: ExecutorCall,
        wait: Duration,
    ) -> Response {
        if !wait.is_zero() {
            return self.long_poll(id, secret, call, wait);
        }
        let (tx, rx) = crossbeam_channel::bounded(2);
        let req = ExecutorRequest {
            executor_id: id,
            secret,
            call,
            reply: tx.into(),
        };
        if self.config.inputs.send(Input::Executor(req)).is_err() {
            return Response::error(503, "scheduler stopping", "the dispatcher is not running");
        }
        match self.wait(&rx, self.options.dispatcher_timeout) {
            Ok(reply) => reply_response(reply),
            Err(w) => w.response(),
        }
    }

    /// A plan request that may wait for a change: the connection goes to the waiter
    /// thread, and this worker is free at once.
    fn long_poll(
        &self,
        id: String,
        secret: Secret,
        call: ExecutorCall,
        wait: Duration,
    ) -> Response {
        let before = self.waits.count.fetch_add(1, Ordering::Relaxed);
        if before >= self.options.max_long_polls {
            self.waits.count.fetch_sub(1, Ordering::Relaxed);
            return Response::error(
                503,
                "too many waiting executors",
                &format!(
                    "{} plan requests are already waiting for a change; retry later",
                    self.options.max_long_polls
                ),
            )
            .with_header("Retry-After", "5");
        }
        let (wait_id, reply) = self.waits.reply_to();
        let req = ExecutorRequest {
            executor_id: id,
            secret,
            call,
            reply,
        };
        if self.config.inputs.send(Input::Executor(req)).is_err() {
            self.waits.count.fetch_sub(1, Ordering::Relaxed);
            return Response::error(503, "scheduler stopping", "the dispatcher is not running");
        }
        let waits = self.waits.clone();
        Response::later(move |conn| waits.park(wait_id, conn, wait))
    }
}

/// The HTTP answer to the dispatcher's reply.
pub(super) fn reply_response(reply: ExecutorReply) -> Response {
    match reply {
        ExecutorReply::Plan(p) => Response::json(200, p.json)
            .with_header("ETag", format!("\"{}\"", p.version))
            .with_header("Cache-Control", "no-store"),
        ExecutorReply::Unchanged => Response::new(304, "application/json", http::Body::Empty)
            .with_header("Cache-Control", "no-store"),
        ExecutorReply::Recorded => json_value(200, serde_json::json!({ "recorded": true })),
        ExecutorReply::RecordedDevices => json_value(
            200,
            serde_json::json!({ "recorded": true, api::DEVICES_RECORDED_FIELD: true }),
        ),
        ExecutorReply::RecordedIdle(p) => {
            // The plan as the plan route serves it, not parsed again.
            let head = format!(
                "{{\"recorded\":true,\"{}\":{},\"{}\":",
                api::NUDGE_PAST_FIELD,
                p.version,
                api::REPORT_PLAN_FIELD
            );
            let mut body = Vec::with_capacity(head.len() + p.json.len() + 1);
            body.extend_from_slice(head.as_bytes());
            body.extend_from_slice(&p.json);
            body.push(b'}');
            Response::json(200, body).with_header("Cache-Control", "no-store")
        }
        // Only a long poll can be parked, and the waiter handles that.
        ExecutorReply::Parked => Response::error(500, "internal error", "parked twice"),
        ExecutorReply::Failed(e) if e.status == 401 => unauthorized(&e.detail),
        ExecutorReply::Failed(e) => Response::error(e.status, e.error, &e.detail),
    }
}

/// A parsed report: no wait.
fn report(parsed: Result<ExecutorCall, ApiError>) -> Result<(ExecutorCall, Duration), Response> {
    parsed
        .map(|c| (c, Duration::ZERO))
        .map_err(|e| Response::error(e.status, e.error, &e.detail))
}

/// The bearer token of `Authorization: Bearer <token>`.
pub(super) fn bearer(req: &Request) -> Result<Secret, Response> {
    let Some(value) = req.header("authorization") else {
        return Err(unauthorized(
            "missing credentials: send Authorization: Bearer <this executor's secret from its TaskInfo.data>",
        ));
    };
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(unauthorized(
            "malformed credentials: expected Authorization: Bearer <secret>",
        ));
    }
    Ok(Secret::new(token))
}
