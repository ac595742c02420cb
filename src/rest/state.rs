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
use std::sync::atomic::{AtomicU8, Ordering};
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
    let gzip = req.accepts_gzip();
    let answer = cache.answer(v.generation, window);
    answer.asked(gzip);
    match answer.body(gzip, || cache.render(v, window)) {
        // As any other JSON answer: the router adds `Vary` for one worth compressing.
        Ok((plain, false)) if window != Window::default() => {
            Response::new(200, "application/json", Body::Shared(plain))
                .with_header("Cache-Control", "no-store")
        }
        Ok((body, gzipped)) => shared(body, gzipped),
        Err(e) => Response::error(500, "cannot encode the state", &e),
    }
}

/// How many windows of one view generation keep their answer (more are encoded for their
/// request alone), and how many windows keep their last render for the next generation.
const WINDOWS_PER_GENERATION: usize = 4;
const RENDERS_KEPT: usize = 2;

/// The answers kept: two generations' windows.
const SLOTS: usize = 2 * WINDOWS_PER_GENERATION;
type Slots = [Option<Arc<Answer>>; SLOTS];

/// The newest generation that has an answer kept.
fn newest(slots: &Slots) -> Option<u64> {
    slots.iter().flatten().map(|a| a.generation).max()
}

/// One window's answer in one view generation, and how it was asked for.
struct Answer {
    generation: u64,
    window: Window,
    json: JsonCache,
    /// A request asked for it (`ASKED`), and one accepting gzip (`ASKED_GZIP`): what the
    /// next generation makes ready for (`StateCache::prepare`).
    asked: AtomicU8,
}

const ASKED: u8 = 1;
const ASKED_GZIP: u8 = 2;

impl Answer {
    fn asked(&self, gzip: bool) {
        self.asked.fetch_or(
            if gzip { ASKED | ASKED_GZIP } else { ASKED },
            Ordering::Relaxed,
        );
    }

    /// The body a client that `accepts` gzip is sent, each form made at most once, and
    /// whether it is gzip: the whole view always is (it is large once it has nodes), a page
    /// once worth compressing.
    fn body(
        &self,
        accepts: bool,
        render: impl FnOnce() -> Result<Arc<Vec<u8>>, String>,
    ) -> Result<(Arc<Vec<u8>>, bool), String> {
        let plain = self.json.get_or_make_shared(render)?;
        if !accepts || (self.window != Window::default() && plain.len() < GZIP_MIN) {
            return Ok((plain, false));
        }
        Ok((self.json.get_or_make_gzip(|| Ok((*plain).clone()))?, true))
    }
}

/// The `/api/state` answers of the two latest view generations seen, one per window asked
/// for, each encoded at most once, off the dispatcher thread; and the last render of the
/// windows asked for most recently, which the next generation's render of the same window
/// copies unchanged nodes from.
///
/// Why two generations: the read that refreshes the shared view makes the new generation's
/// answers ready (`prepare`) before the view is kept (`view_cache.rs`), and meanwhile the
/// other reads are served the kept view, whose answers must still be there. So no read but
/// that one waits for an encoding: with 32 clients on 1,000 changing nodes every read that
/// came in during each render waited for it, and they made the p99.
#[derive(Default)]
pub(super) struct StateCache {
    // Read-mostly: every request of one generation and window only reads.
    answers: RwLock<Slots>,
    /// Most recently rendered first.
    renders: Mutex<Vec<(Window, Arc<Render>)>>,
}

impl StateCache {
    /// The shared answer of `window` in `generation`. A newer generation drops all but the
    /// newest one's answers before it; an older one not kept is answered uncached.
    fn answer(&self, generation: u64, window: Window) -> Arc<Answer> {
        let find = |slots: &Slots| {
            slots
                .iter()
                .flatten()
                .find(|a| a.generation == generation && a.window == window)
                .cloned()
        };
        if let Some(a) = find(&self.answers.read().unwrap_or_else(|e| e.into_inner())) {
            return a;
        }
        let mut slots = self.answers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = find(&slots) {
            return a;
        }
        let fresh = Arc::new(Answer {
            generation,
            window,
            json: JsonCache::default(),
            asked: AtomicU8::new(0),
        });
        let newest = newest(&slots);
        if newest.is_some_and(|n| n < generation) {
            for slot in slots.iter_mut() {
                if slot.as_ref().is_some_and(|a| Some(a.generation) != newest) {
                    *slot = None;
                }
            }
        }
        let same = slots
            .iter()
            .flatten()
            .filter(|a| a.generation == generation)
            .count();
        // A request that got an older view than the two kept, or one window too many:
        // served uncached. (Two generations of at most so many windows: a slot is free.)
        if (same > 0 || newest.is_none_or(|n| n < generation)) && same < WINDOWS_PER_GENERATION {
            if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
                *free = Some(fresh.clone());
            }
        }
        fresh
    }

    /// Makes ready, for `v`, the answers that reads asked for of the newest generation
    /// before it, as they asked for them (plain, gzip): the next reads of those windows
    /// find them made. Errors are left for a read to meet and report.
    pub(super) fn prepare(&self, v: &View) {
        let mut asked = [None; SLOTS];
        {
            let slots = self.answers.read().unwrap_or_else(|e| e.into_inner());
            let newest = newest(&slots);
            if newest.is_none_or(|n| n >= v.generation) {
                return;
            }
            for (to, a) in asked.iter_mut().zip(slots.iter().flatten()) {
                let how = a.asked.load(Ordering::Relaxed);
                if Some(a.generation) == newest && how & ASKED != 0 {
                    *to = Some((a.window, how));
                }
            }
        }
        for (window, how) in asked.into_iter().flatten() {
            let answer = self.answer(v.generation, window);
            let _ = answer.body(how & ASKED_GZIP != 0, || self.render(v, window));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn view(generation: u64) -> View {
        View::of(ClusterModel::default(), generation)
    }

    fn get(target: &str, gzip: bool) -> Request {
        let headers = match gzip {
            true => vec![("accept-encoding".to_string(), "gzip".to_string())],
            false => Vec::new(),
        };
        Request::new("GET", target, headers, Vec::new())
    }

    fn page(offset: usize) -> Window {
        Window {
            offset: Some(offset),
            limit: None,
        }
    }

    #[test]
    fn the_next_generation_is_made_ready_as_asked_while_the_last_ones_answers_stay() {
        let cache = StateCache::default();
        let (one, two) = (view(1), view(2));
        assert_eq!(respond(&one, &get("/api/state", true), &cache).status, 200);
        assert_eq!(
            respond(&one, &get("/api/state?offset=0", false), &cache).status,
            200
        );
        let whole = cache.answer(1, Window::default());
        cache.prepare(&two);
        // Reads of the kept view while the next one was made ready: the same answer.
        assert!(Arc::ptr_eq(&cache.answer(1, Window::default()), &whole));
        assert_eq!(whole.json.made(), (true, true));
        // Made as they were asked for: the whole view with its gzip, the page plain.
        assert_eq!(cache.answer(2, Window::default()).json.made(), (true, true));
        assert_eq!(cache.answer(2, page(0)).json.made(), (true, false));
        // A window no read asked for of the last view is left for a read to ask.
        assert_eq!(cache.answer(2, page(5)).json.made(), (false, false));
    }

    #[test]
    fn only_what_reads_asked_for_is_made_and_only_for_a_newer_view() {
        let cache = StateCache::default();
        cache.prepare(&view(1));
        assert_eq!(
            newest(&cache.answers.read().unwrap()),
            None,
            "nothing asked"
        );
        // An answer made but never asked for (a generation no read came for) is not made
        // again for the next.
        cache.answer(1, Window::default());
        cache.prepare(&view(2));
        assert_eq!(
            cache.answer(2, Window::default()).json.made(),
            (false, false)
        );
        respond(&view(3), &get("/api/state", false), &cache);
        // Not newer: nothing to do (and nothing made for an older one).
        cache.prepare(&view(3));
        cache.prepare(&view(2));
        let generations: Vec<u64> = cache
            .answers
            .read()
            .unwrap()
            .iter()
            .flatten()
            .map(|a| a.generation)
            .collect();
        assert!(generations.iter().all(|g| *g >= 2), "{generations:?}");
    }

    #[test]
    fn two_generations_are_kept_and_an_older_view_is_answered_uncached() {
        let cache = StateCache::default();
        let first = cache.answer(1, Window::default());
        cache.answer(2, Window::default());
        assert!(Arc::ptr_eq(&cache.answer(1, Window::default()), &first));
        cache.answer(3, Window::default());
        let gone = cache.answer(1, Window::default());
        assert!(!Arc::ptr_eq(&gone, &first));
        assert!(
            !Arc::ptr_eq(&cache.answer(1, Window::default()), &gone),
            "not kept"
        );
        // At most so many windows a generation.
        let pages: Vec<_> = (0..WINDOWS_PER_GENERATION + 1)
            .map(|i| cache.answer(3, page(i)))
            .collect();
        let last = pages.last().unwrap();
        assert!(!Arc::ptr_eq(
            &cache.answer(3, page(WINDOWS_PER_GENERATION)),
            last
        ));
        assert!(Arc::ptr_eq(&cache.answer(3, page(0)), &pages[0]));
    }
}
