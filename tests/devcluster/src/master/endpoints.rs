//! HTTP front ends of the master and the agents: request checks in the order Mesos makes
//! them (leadership, method, Content-Type, body, call validation, Accept), then a hand-off to
//! the cluster owner, whose reply is the response.

use super::http::{Handler, Reply, Request, Response};
use super::ids::valid_uuid;
use super::maintenance::MaintenanceCall;
use super::state::{Cmd, Control};
use crossbeam_channel::Sender;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::{self, call};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{executor, Encoding};

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

pub(super) struct MasterFront {
    pub index: usize,
    pub tx: Sender<Cmd>,
    pub leader: Arc<AtomicUsize>,
    pub addrs: [SocketAddr; 2],
    pub flags: Value,
    pub version: Value,
    pub wire_tap: Option<std::path::PathBuf>,
    pub readonly_auth: bool,
}

pub(super) fn master_handler(front: MasterFront) -> Handler {
    let front = Arc::new(front);
    Arc::new(move |req| front.handle(req))
}

impl MasterFront {
    fn handle(&self, req: Request) -> Reply {
        // Requests reach the master under its process id too: /master/state == /state.
        let path = req
            .path
            .strip_prefix("/master")
            .filter(|p| p.starts_with('/'))
            .unwrap_or(&req.path)
            .to_string();
        let leader = self.leader.load(Ordering::SeqCst);
        if self.readonly_auth && is_readonly(&path) && req.header("Authorization").is_none() {
            return Response::new(401)
                .header("WWW-Authenticate", "Basic realm=\"mesos-master-readonly\"")
                .into();
        }
        match path.as_str() {
            "/api/v1/scheduler" => {
                if leader != self.index {
                    return self.redirect(leader, "/master/api/v1/scheduler", &req.query);
                }
                self.scheduler(req)
            }
            "/state" | "/state.json" | "/slaves" | "/slaves.json" => {
                if leader != self.index {
                    return self.redirect(leader, &format!("/master{path}"), &req.query);
                }
                if let Some(r) = only_get(&req) {
                    return r.into();
                }
                let (tx, rx) = crossbeam_channel::bounded(1);
                let cmd = if path.starts_with("/slaves") {
                    Cmd::MasterSlaves(tx)
                } else {
                    Cmd::MasterState(tx)
                };
                if self.tx.send(cmd).is_err() {
                    return gone();
                }
                match rx.recv() {
                    Ok(Ok(body)) => Response::new(200)
                        .header("Content-Type", "application/json")
                        .body(body)
                        .into(),
                    Ok(Err(e)) => Response::text(500, e).into(),
                    Err(_) => gone(),
                }
            }
            // Mesos's /master/frameworks: the frameworks part of the state (the scheduler's guard
            // against a second framework of the same name and role reads it).
            "/frameworks" => {
                if leader != self.index {
                    return self.redirect(leader, &format!("/master{path}"), &req.query);
                }
                if let Some(r) = only_get(&req) {
                    return r.into();
                }
                let (tx, rx) = crossbeam_channel::bounded(1);
                if self.tx.send(Cmd::MasterState(tx)).is_err() {
                    return gone();
                }
                match rx.recv() {
                    Ok(Ok(body)) => {
                        let state: Value =
                            serde_json::from_slice(body.as_ref()).unwrap_or_default();
                        Response::json(
                            200,
                            &serde_json::json!({
                                "frameworks": state["frameworks"],
                                "completed_frameworks": state["completed_frameworks"],
                                "unregistered_frameworks": [],
                            }),
                        )
                        .into()
                    }
                    Ok(Err(e)) => Response::text(500, e).into(),
                    Err(_) => gone(),
                }
            }
            "/flags" => match only_get(&req) {
                Some(r) => r.into(),
                None => Response::json(200, &self.flags).into(),
            },
            "/version" => match only_get(&req) {
                Some(r) => r.into(),
                None => Response::json(200, &self.version).into(),
            },
            "/redirect" => {
                let a = self.addrs[leader];
                Response::new(307)
                    .header("Location", format!("//{}:{}", a.ip(), a.port()))
                    .into()
            }
            "/health" => Response::new(200).into(),
            _ => match MaintenanceCall::route(&path, &req.method) {
                Some(_) if leader != self.index => {
                    self.redirect(leader, &format!("/master{path}"), &req.query)
                }
                Some(Ok(call)) => self.maintenance(call, req.body),
                Some(Err(refusal)) => Response::text(405, refusal).into(),
                None => Response::text(404, format!("No endpoint {}", req.path)).into(),
            },
        }
    }

    fn maintenance(&self, call: MaintenanceCall, body: Vec<u8>) -> Reply {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self
            .tx
            .send(Cmd::Maintenance {
                call,
                body,
                reply: tx,
            })
            .is_err()
        {
            return gone();
        }
        match rx.recv() {
            Ok(Ok(Some(v))) => Response::json(200, &v).into(),
            Ok(Ok(None)) => Response::new(200).into(),
            Ok(Err(e)) => Response::text(400, e).into(),
            Err(_) => gone(),
        }
    }

    fn redirect(&self, leader: usize, path: &str, query: &str) -> Reply {
        let a = self.addrs[leader];
        let mut location = format!("//{}:{}{path}", a.ip(), a.port());
        if !query.is_empty() {
            location.push('?');
            location.push_str(query);
        }
        Response::new(307).header("Location", location).into()
    }

    fn scheduler(&self, req: Request) -> Reply {
        if req.method != "POST" {
            return method_not_allowed(&req);
        }
        let call: scheduler::Call = match decode_call(&req) {
            Ok(c) => c,
            Err(r) => return r.into(),
        };
        if let Err(e) = validate_scheduler_call(&call) {
            return Response::text(400, format!("Failed to validate scheduler::Call: {e}")).into();
        }
        let ct = req.header("Content-Type").unwrap_or_default();
        super::tap::record(self.wire_tap.as_deref(), "scheduler", ct, &req.body);
        let mut accept = Encoding::Json;
        if call.r#type == Some(call::Type::Subscribe) {
            accept = match negotiate(&req) {
                Ok(a) => a,
                Err(r) => return r.into(),
            };
            if req.has_header("Mesos-Stream-Id") {
                return Response::text(
                    400,
                    "Subscribe calls should not include the 'Mesos-Stream-Id' header",
                )
                .into();
            }
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let cmd = Cmd::Scheduler {
            call: Box::new(call),
            stream_id: req.header("Mesos-Stream-Id").map(str::to_string),
            accept,
            reply: tx,
        };
        if self.tx.send(cmd).is_err() {
            return gone();
        }
        rx.recv().unwrap_or_else(|_| gone())
    }
}

pub(super) fn agent_handler(
    agent: usize,
    tx: Sender<Cmd>,
    wire_tap: Option<std::path::PathBuf>,
) -> Handler {
    Arc::new(move |req: Request| {
        // The agent's libprocess id is `slave(1)`.
        let path = req
            .path
            .strip_prefix("/slave(1)")
            .filter(|p| p.starts_with('/'))
            .unwrap_or(&req.path)
            .to_string();
        match path.as_str() {
            "/api/v1/executor" => executor_front(agent, &tx, wire_tap.as_deref(), req),
            "/state" | "/state.json" => {
                if let Some(r) = only_get(&req) {
                    return r.into();
                }
                let (rtx, rrx) = crossbeam_channel::bounded(1);
                if tx.send(Cmd::AgentState { agent, reply: rtx }).is_err() {
                    return gone();
                }
                match rrx.recv() {
                    Ok(v) => Response::json(200, &v).into(),
                    Err(_) => gone(),
                }
            }
            "/health" => Response::new(200).into(),
            _ => Response::text(404, format!("No endpoint {}", req.path)).into(),
        }
    })
}

fn executor_front(
    agent: usize,
    tx: &Sender<Cmd>,
    wire_tap: Option<&std::path::Path>,
    req: Request,
) -> Reply {
    if req.method != "POST" {
        return method_not_allowed(&req);
    }
    let call: executor::Call = match decode_call(&req) {
        Ok(c) => c,
        Err(r) => return r.into(),
    };
    if let Err(e) = validate_executor_call(&call) {
        return Response::text(400, format!("Failed to validate Executor::Call: {e}")).into();
    }
    let ct = req.header("Content-Type").unwrap_or_default();
    super::tap::record(wire_tap, "executor", ct, &req.body);
    let mut accept = Encoding::Json;
    if call.r#type == Some(executor::call::Type::Subscribe) {
        accept = match negotiate(&req) {
            Ok(a) => a,
            Err(r) => return r.into(),
        };
    }
    let (rtx, rrx) = crossbeam_channel::bounded(1);
    let cmd = Cmd::Executor {
        agent,
        call: Box::new(call),
        accept,
        reply: rtx,
    };
    if tx.send(cmd).is_err() {
        return gone();
    }
    rrx.recv().unwrap_or_else(|_| gone())
}

fn gone() -> Reply {
    Response::text(503, "The cluster is shutting down").into()
}

/// The endpoints Mesos guards with `--authenticate_http_readonly`.
fn is_readonly(path: &str) -> bool {
    matches!(
        path,
        "/state" | "/state.json" | "/slaves" | "/slaves.json" | "/frameworks" | "/flags"
    )
}

fn only_get(req: &Request) -> Option<Response> {
    if req.method == "GET" || req.method == "HEAD" {
        return None;
    }
    Some(
        Response::text(
            405,
            format!(
                "Expecting one of {{ 'GET' }}, but received '{}'",
                req.method
            ),
        )
        .header("Allow", "GET"),
    )
}

fn method_not_allowed(req: &Request) -> Reply {
    Response::text(
        405,
        format!(
            "Expecting one of {{ 'POST' }}, but received '{}'",
            req.method
        ),
    )
    .header("Allow", "POST")
    .into()
}

/// Body by Content-Type, compared exactly as Mesos 1.4 does (no parameters allowed).
fn decode_call<M: Message + DeserializeOwned>(req: &Request) -> Result<M, Response> {
    let Some(ct) = req.header("Content-Type") else {
        return Err(Response::text(
            400,
            "Expecting 'Content-Type' to be present",
        ));
    };
    match ct {
        PROTOBUF => M::decode(&req.body).map_err(|e| {
            Response::text(400, format!("Failed to parse body into Call protobuf: {e}"))
        }),
        JSON => {
            let value: Value = serde_json::from_slice(&req.body)
                .map_err(|e| Response::text(400, format!("Failed to parse body into JSON: {e}")))?;
            serde_json::from_value(value).map_err(|e| {
                Response::text(
                    400,
                    format!("Failed to convert JSON into Call protobuf: {e}"),
                )
            })
        }
        _ => Err(Response::text(
            415,
            format!("Expecting 'Content-Type' of {JSON} or {PROTOBUF}"),
        )),
    }
}

/// The stream encoding: JSON whenever the client accepts it (a missing Accept accepts
/// everything), else protobuf, else 406.
fn negotiate(req: &Request) -> Result<Encoding, Response> {
    let Some(accept) = req.header("Accept") else {
        return Ok(Encoding::Json);
    };
    if accepts(accept, JSON) {
        Ok(Encoding::Json)
    } else if accepts(accept, PROTOBUF) {
        Ok(Encoding::Protobuf)
    } else {
        Err(Response::text(
            406,
            format!("Expecting 'Accept' to allow '{PROTOBUF}' or '{JSON}'"),
        ))
    }
}

fn accepts(header: &str, media: &str) -> bool {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    let mut best: Option<(u8, f64)> = None;
    for range in header.split(',') {
        let mut parts = range.split(';');
        let m = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .filter_map(|q| q.trim().parse::<f64>().ok())
            .next()
            .unwrap_or(1.0);
        let specificity = if m == media {
            3
        } else if m == format!("{kind}/*") {
            2
        } else if m == "*/*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, q));
        }
    }
    best.is_some_and(|(_, q)| q > 0.0)
}

fn validate_scheduler_call(c: &scheduler::Call) -> Result<(), String> {
    let Some(t) = c.r#type else {
        return Err("Expecting 'type' to be present".into());
    };
    if t == call::Type::Subscribe {
        let Some(s) = &c.subscribe else {
            return Err("Expecting 'subscribe' to be present".into());
        };
        if s.framework_info.id != c.framework_id {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".into());
        }
        return Ok(());
    }
    if c.framework_id.is_none() {
        return Err("Expecting 'framework_id' to be present".into());
    }
    let missing = |field: &str| Err(format!("Expecting '{field}' to be present"));
    match t {
        call::Type::Accept if c.accept.is_none() => missing("accept"),
        call::Type::Decline if c.decline.is_none() => missing("decline"),
        call::Type::Kill if c.kill.is_none() => missing("kill"),
        call::Type::Shutdown if c.shutdown.is_none() => missing("shutdown"),
        call::Type::Acknowledge => match &c.acknowledge {
            None => missing("acknowledge"),
            Some(a) if !valid_uuid(&a.uuid.0) => Err("Not a valid UUID".into()),
            Some(_) => Ok(()),
        },
        call::Type::Reconcile if c.reconcile.is_none() => missing("reconcile"),
        call::Type::Message if c.message.is_none() => missing("message"),
        call::Type::Request if c.request.is_none() => missing("request"),
        call::Type::AcceptInverseOffers if c.accept_inverse_offers.is_none() => {
            missing("accept_inverse_offers")
        }
        call::Type::DeclineInverseOffers if c.decline_inverse_offers.is_none() => {
            missing("decline_inverse_offers")
        }
        _ => Ok(()),
    }
}

fn validate_executor_call(c: &executor::Call) -> Result<(), String> {
    use executor::call::Type;
    let Some(t) = c.r#type else {
        return Err("Expecting 'type' to be present".into());
    };
    match t {
        Type::Subscribe if c.subscribe.is_none() => {
            Err("Expecting 'subscribe' to be present".into())
        }
        Type::Update => {
            let Some(u) = &c.update else {
                return Err("Expecting 'update' to be present".into());
            };
            let s = &u.status;
            let Some(uuid) = &s.uuid else {
                return Err("Expecting 'uuid' to be present".into());
            };
            if !valid_uuid(&uuid.0) {
                return Err("Not a valid UUID".into());
            }
            if let Some(e) = &s.executor_id {
                if e.value != c.executor_id.value {
                    return Err(format!(
                        "ExecutorID in Call: {} does not match ExecutorID in TaskStatus: {}",
                        c.executor_id.value, e.value
                    ));
                }
            }
            if s.source != Some(task_status::Source::Executor) {
                return Err(format!(
                    "Received Call from executor {} of framework {} with invalid source, \
                     expecting 'SOURCE_EXECUTOR'",
                    c.executor_id.value, c.framework_id.value
                ));
            }
            if s.state == TaskState::Staging {
                return Err(format!(
                    "Received TASK_STAGING from executor {} of framework {} which is not \
                     allowed",
                    c.executor_id.value, c.framework_id.value
                ));
            }
            Ok(())
        }
        Type::Message if c.message.is_none() => Err("Expecting 'message' to be present".into()),
        _ => Ok(()),
    }
}

/// For `MasterHandle`: a control request and its answer.
pub(super) fn control<T>(
    tx: &Sender<Cmd>,
    make: impl FnOnce(Sender<T>) -> Control,
) -> Result<T, String> {
    let (rtx, rrx) = crossbeam_channel::bounded(1);
    tx.send(Cmd::Control(make(rtx)))
        .map_err(|_| "the cluster has shut down".to_string())?;
    rrx.recv()
        .map_err(|_| "the cluster has shut down".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_negotiation() {
        assert!(accepts("application/json", JSON));
        assert!(!accepts("application/json", PROTOBUF));
        assert!(accepts("*/*", PROTOBUF));
        assert!(accepts("application/*;q=0.5", PROTOBUF));
        assert!(!accepts("application/x-protobuf;q=0", PROTOBUF));
        assert!(!accepts("text/plain", JSON));
        assert!(accepts("text/plain, application/x-protobuf", PROTOBUF));
    }
}
