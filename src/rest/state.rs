//! `GET /api/state` and `GET /api/nodes/<host>` (issue 12 item 5).
//!
//! `/api/state` of a cluster of up to [`STATE_DEFAULT_LIMIT`] nodes is the whole view, as it
//! always was. Above that, or whenever `offset` or `limit` is given, it is a page: the same
//! shape with only the page's nodes in `model.nodes` (in agent id order, the map's order),
//! plus `page` (`offset`, `limit`, `total`, and `next`, the path of the next page, while
//! there is one) and `counts` (nodes per phase and persona over the whole cluster). So no
//! response holds more than [`STATE_MAX_LIMIT`] nodes, however large the cluster. The
//! default answer of each view generation is encoded once and shared (see `StateCache`).

use super::http::{Body, Request, Response};
use super::paging::{Counts, Window, STATE_DEFAULT_LIMIT, STATE_MAX_LIMIT};
use super::JsonCache;
use crate::scheduler::exchange::View;
use crate::scheduler::model::ClusterModel;
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize)]
struct PageInfo {
    offset: usize,
    limit: usize,
    total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[derive(Serialize)]
struct Paged<'a> {
    #[serde(flatten)]
    view: &'a View,
    page: PageInfo,
    counts: Counts,
}

/// The view with only the nodes of `window` (default: the first page), and what paging needs.
fn paged_json(v: &View, window: &Window) -> Result<Vec<u8>, String> {
    let m = &v.model;
    let total = m.nodes.len();
    let range = window.range(total, STATE_DEFAULT_LIMIT);
    let limit = window.limit.unwrap_or(STATE_DEFAULT_LIMIT);
    let nodes = m
        .nodes
        .iter()
        .skip(range.start)
        .take(range.len())
        .map(|(k, n)| (k.clone(), n.clone()))
        .collect();
    let page = View {
        subscribed: v.subscribed,
        master: v.master.clone(),
        disconnected_reason: v.disconnected_reason.clone(),
        suppressed: v.suppressed,
        model: ClusterModel {
            framework_id: m.framework_id.clone(),
            nodes,
            launch_seq: m.launch_seq,
            heartbeat_secs: m.heartbeat_secs,
            pools: m.pools.clone(),
        },
        generated_ms: v.generated_ms,
        generation: v.generation,
    };
    let body = Paged {
        view: &page,
        page: PageInfo {
            offset: range.start,
            limit,
            total,
            next: (range.end < total)
                .then(|| format!("/api/state?offset={}&limit={limit}", range.end)),
        },
        counts: Counts::of(m.nodes.values()),
    };
    serde_json::to_vec(&body).map_err(|e| e.to_string())
}

/// `/api/state`: the shared default answer of this generation, or the page asked for.
pub(super) fn respond(v: &View, req: &Request, cache: &JsonCache) -> Response {
    let window = match Window::parse(|n| req.query_param(n), STATE_MAX_LIMIT) {
        Ok(w) => w,
        Err(e) => return Response::error(400, "bad query parameter", &e),
    };
    if window != Window::default() {
        // Bounded by the limit; the router gzips it for clients that take gzip.
        return match paged_json(v, &window) {
            Ok(body) => Response::json(200, body).with_header("Cache-Control", "no-store"),
            Err(e) => Response::error(500, "cannot encode the state", &e),
        };
    }
    let whole = v.model.nodes.len() <= STATE_DEFAULT_LIMIT;
    let make = || {
        if whole {
            serde_json::to_vec(v).map_err(|e| e.to_string())
        } else {
            paged_json(v, &window)
        }
    };
    let gzip = req.accepts_gzip();
    let encoded = if gzip {
        cache.get_or_make_gzip(make)
    } else {
        cache.get_or_make(make)
    };
    match encoded {
        Ok(body) => shared(body, gzip),
        Err(e) => Response::error(500, "cannot encode the state", &e),
    }
}

fn shared(body: Arc<Vec<u8>>, gzip: bool) -> Response {
    let resp = Response::new(200, "application/json", Body::Shared(body))
        .with_header("Cache-Control", "no-store")
        .with_header("Vary", "Accept-Encoding");
    if gzip {
        resp.with_header("Content-Encoding", "gzip")
    } else {
        resp
    }
}

/// `/api/nodes/<host>`: the node on `host` (percent-encoded in the path), as it shows in
/// `/api/state`'s `model.nodes`.
pub(super) fn node(v: &View, raw_host: &str) -> Response {
    let host = match super::http::percent_decode(raw_host) {
        Ok(h) => h,
        Err(e) => return Response::error(400, "bad host name", &e),
    };
    if host.is_empty() {
        return Response::error(404, "not found", "name a host: /api/nodes/<host>");
    }
    match v.model.nodes.values().find(|n| n.hostname == host) {
        Some(n) => match serde_json::to_vec(n) {
            Ok(body) => Response::json(200, body).with_header("Cache-Control", "no-store"),
            Err(e) => Response::error(500, "cannot encode the node", &e.to_string()),
        },
        None => Response::error(
            404,
            "unknown node",
            &format!(
                "no node on host {:?}",
                host.chars().take(200).collect::<String>()
            ),
        ),
    }
}
