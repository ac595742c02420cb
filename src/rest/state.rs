//! `GET /api/state` and `GET /api/nodes/<host>`.
//!
//! `/api/state` of a cluster of up to [`STATE_DEFAULT_LIMIT`] nodes is the whole view, as it
//! always was. Above that, or whenever `offset` or `limit` is given, it is a page: the same
//! shape with only the page's nodes in `model.nodes` (in agent id order, the map's order),
//! plus `page` (`offset`, `limit`, `total`, and `next`, the path of the next page, while
//! there is one) and `counts` (nodes per phase and persona over the whole cluster). So no
//! response holds more than [`STATE_MAX_LIMIT`] nodes, however large the cluster. The answer
//! for a window (`offset` and `limit`, or none) is encoded once per view generation and shared
//! (see `StateCache`), and copies the JSON of the nodes that did not change from the last
//! render of the same window (`state_render.rs`). Each node shows the target generation it
//! walks toward (`target_generation`, the model's `target.generation`) beside the one it
//! reached (`generation`).

use super::http::{Body, Request, Response};
use super::json_cache::{JsonCache, GZIP_MIN};
use super::paging::{Counts, Window, STATE_DEFAULT_LIMIT, STATE_MAX_LIMIT};
use super::state_render::{self, Render};
use crate::scheduler::exchange::View;
use crate::scheduler::model::ClusterModel;
use serde::Serialize;
use std::sync::{Arc, Mutex, RwLock};

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

/// The answer for `window`: the whole view (a cluster of up to a page, no window asked
/// for), else a page with its paging facts; built from `previous`, the last render of the
/// same window, where nodes did not change.
fn render(v: &View, window: &Window, previous: Option<&Render>) -> Result<Render, String> {
    let m = &v.model;
    let total = m.nodes.len();
    // The answer without its nodes, encoded by serde as it stands; the nodes go in its
    // empty `model.nodes` (see state_render.rs).
    let shell_view = View {
        subscribed: v.subscribed,
        master: v.master.clone(),
        disconnected_reason: v.disconnected_reason.clone(),
        suppressed: v.suppressed,
        attach_queue: v.attach_queue,
        model: ClusterModel {
            framework_id: m.framework_id.clone(),
            nodes: Default::default(),
            launch_seq: m.launch_seq,
            heartbeat_secs: m.heartbeat_secs,
            pools: m.pools.clone(),
            health: m.health.clone(),
            target: m.target.clone(),
            paused: m.paused,
        },
        generated_ms: v.generated_ms,
        generation: v.generation,
        events: Default::default(),
    };
    let encode = |e: serde_json::Error| e.to_string();
    let extra = target_field(m);
    if *window == Window::default() && total <= STATE_DEFAULT_LIMIT {
        let shell = serde_json::to_vec(&shell_view).map_err(encode)?;
        let nodes = m.nodes.iter_shared();
        return Ok(state_render::render(&shell, nodes, &extra, previous)?.0);
    }
    let range = window.range(total, STATE_DEFAULT_LIMIT);
    let limit = window.limit.unwrap_or(STATE_DEFAULT_LIMIT);
    let shell = serde_json::to_vec(&Paged {
        view: &shell_view,
        page: PageInfo {
            offset: range.start,
            limit,
            total,
            next: (range.end < total)
                .then(|| format!("/api/state?offset={}&limit={limit}", range.end)),
        },
        counts: Counts::of(m.nodes.values()),
    })
    .map_err(encode)?;
    let nodes = m.nodes.iter_shared().skip(range.start).take(range.len());
    Ok(state_render::render(&shell, nodes, &extra, previous)?.0)
}

/// The field every node of `model` carries in the answer though the model holds it once.
fn target_field(model: &ClusterModel) -> Vec<u8> {
    format!("\"target_generation\":{}", model.target.generation).into_bytes()
}

/// `/api/state`: the answer for the window asked for (by default the whole view, or its
/// first page), encoded once per view generation and window and shared by every request
/// for it.
pub(super) fn respond(v: &View, req: &Request, cache: &StateCache) -> Response {
    let window = match Window::parse(|n| req.query_param(n), STATE_MAX_LIMIT) {
        Ok(w) => w,
        Err(e) => return Response::error(400, "bad query parameter", &e),
    };
    let answer = cache.answer(v.generation, window);
    let make = || cache.render(v, window);
    let plain = match answer.get_or_make_shared(make) {
        Ok(body) => body,
        Err(e) => return Response::error(500, "cannot encode the state", &e),
    };
    let gzip = req.accepts_gzip();
    if window != Window::default() && (!gzip || plain.len() < GZIP_MIN) {
        // As any other JSON answer: the router adds `Vary` for one worth compressing.
        return Response::new(200, "application/json", Body::Shared(plain))
            .with_header("Cache-Control", "no-store");
    }
    if !gzip {
        return shared(plain, false);
    }
    match answer.get_or_make_gzip(|| Ok((*plain).clone())) {
        Ok(body) => shared(body, true),
        Err(e) => Response::error(500, "cannot encode the state", &e),
    }
}

/// How many windows of one view generation keep their answer (more are encoded for their
/// request alone), and how many windows keep their last render for the next generation.
const WINDOWS_PER_GENERATION: usize = 4;
const RENDERS_KEPT: usize = 2;

/// The `/api/state` answers of the latest view generation seen, one per window asked for,
/// each encoded at most once, off the dispatcher thread; and the last render of the windows
/// asked for most recently, which the next generation's render of the same window copies
/// unchanged nodes from.
/// A view generation and its windows' answers.
type Answers = (u64, Vec<(Window, Arc<JsonCache>)>);

#[derive(Default)]
pub(super) struct StateCache {
    // Read-mostly: every request of one generation and window only reads.
    current: RwLock<Answers>,
    /// Most recently rendered first.
    renders: Mutex<Vec<(Window, Arc<Render>)>>,
}

impl StateCache {
    /// The shared answer of `window` in `generation`; a newer generation replaces the older
    /// one's answers.
    fn answer(&self, generation: u64, window: Window) -> Arc<JsonCache> {
        let find = |(g, answers): &Answers| {
            answers
                .iter()
                .find(|(w, _)| *g == generation && *w == window)
                .map(|(_, a)| a.clone())
        };
        if let Some(a) = find(&self.current.read().unwrap_or_else(|e| e.into_inner())) {
            return a;
        }
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = find(&current) {
            return a;
        }
        let fresh = Arc::new(JsonCache::default());
        if current.0 < generation {
            *current = (generation, Vec::new());
        }
        // A request that got an older view than another one did, or one window too many:
        // served uncached.
        if current.0 == generation && current.1.len() < WINDOWS_PER_GENERATION {
            current.1.push((window, fresh.clone()));
        }
        fresh
    }

    /// Encodes the answer for `window` from its last render, which it then replaces.
    fn render(&self, v: &View, window: Window) -> Result<Arc<Vec<u8>>, String> {
        let previous = {
            let renders = self.renders.lock().unwrap_or_else(|e| e.into_inner());
            renders
                .iter()
                .find(|(w, _)| *w == window)
                .map(|(_, r)| r.clone())
        };
        let made = Arc::new(render(v, &window, previous.as_deref())?);
        let body = made.body.clone();
        let mut renders = self.renders.lock().unwrap_or_else(|e| e.into_inner());
        renders.retain(|(w, _)| *w != window);
        renders.insert(0, (window, made));
        renders.truncate(RENDERS_KEPT);
        Ok(body)
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
        Some(n) => {
            let mut body = match serde_json::to_vec(n) {
                Ok(body) => body,
                Err(e) => return Response::error(500, "cannot encode the node", &e.to_string()),
            };
            if let Err(e) = state_render::close_with(&mut body, &target_field(&v.model)) {
                return Response::error(500, "cannot encode the node", &e);
            }
            Response::json(200, body).with_header("Cache-Control", "no-store")
        }
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
