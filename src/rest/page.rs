//! The HTML status page, rendered on the server with every value escaped, so it works
//! without JavaScript. A small script refreshes it in place every few seconds by fetching the
//! same page's content (`?partial=1`, also server-rendered); without JavaScript a meta
//! refresh reloads it.

use super::paging::{select, Counts, Filter, Window, PAGE_DEFAULT_LIMIT, PAGE_MAX_LIMIT};
use crate::scheduler::exchange::View;
use crate::scheduler::model::Phase;
use std::fmt::Write;

const REFRESH_MS: u32 = 5000;
/// Last contact older than this is shown as stale.
pub(super) const STALE_MS: u64 = 2 * 60 * 1000;

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// "12 s ago", "3 min ago", ...
pub fn ago(now_ms: u64, then_ms: u64) -> String {
    let s = now_ms.saturating_sub(then_ms) / 1000;
    match s {
        0 => "just now".into(),
        1..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// `2024-05-01 12:00:03 UTC` (civil-from-days; no date library needed for one line).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(super) fn phase_class(p: Phase) -> &'static str {
    match p {
        Phase::Running => "ok",
        Phase::Failed => "bad",
        Phase::Lost => "warn",
        Phase::Launching => "idle",
        _ => "busy",
    }
}

const STYLE: &str = r#"
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f6f7f9;--card:#fff;
--ok:#15803d;--ok-bg:#dcfce7;--bad:#b91c1c;--bad-bg:#fee2e2;--warn:#b45309;--warn-bg:#fef3c7;
--busy:#1d4ed8;--busy-bg:#dbeafe;--idle:#4b5563;--idle-bg:#e5e7eb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1400px;margin:0 auto;padding:20px 24px 32px}
header{display:flex;align-items:center;justify-content:space-between;gap:16px;flex-wrap:wrap}
h1{font-size:20px;margin:0;font-weight:650;letter-spacing:-.01em}
h1 small{font-size:13px;color:var(--muted);font-weight:400;margin-left:8px}
.conn{display:inline-flex;align-items:center;gap:8px;padding:5px 12px;border-radius:999px;font-weight:600;font-size:13px}
.conn.ok{background:var(--ok-bg);color:var(--ok)}.conn.bad{background:var(--bad-bg);color:var(--bad)}
.dot{width:8px;height:8px;border-radius:50%;background:currentColor}
.facts{display:flex;flex-wrap:wrap;gap:8px 28px;margin:14px 0 16px;padding:12px 16px;background:var(--card);border:1px solid var(--line);border-radius:10px}
.facts div{min-width:0}.facts dt{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
.facts dd{margin:0;font-weight:550;overflow-wrap:anywhere}
.totals{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:14px}
.pools{display:grid;gap:6px;margin-bottom:14px}.pool{display:flex;gap:10px;align-items:center}
.pool .bar{flex:1;max-width:420px;height:10px;background:#e5e7eb;border-radius:5px;overflow:hidden}
.pool .bar i{display:block;height:100%;background:#2563eb}.pool.over .bar i{background:#dc2626}
.pool.over b{color:#dc2626}
.chip{display:inline-flex;gap:6px;align-items:baseline;padding:4px 10px;border-radius:8px;font-size:13px;border:1px solid transparent}
.chip b{font-size:15px}
.ok{--c:var(--ok);--cb:var(--ok-bg)}.bad{--c:var(--bad);--cb:var(--bad-bg)}.warn{--c:var(--warn);--cb:var(--warn-bg)}
.busy{--c:var(--busy);--cb:var(--busy-bg)}.idle{--c:var(--idle);--cb:var(--idle-bg)}
.chip,.badge{background:var(--cb);color:var(--c)}
.chip.total{background:var(--card);border-color:var(--line);color:var(--fg)}
table{width:100%;border-collapse:separate;border-spacing:0;background:var(--card);border:1px solid var(--line);border-radius:10px;overflow:hidden}
th,td{padding:9px 12px;text-align:left;vertical-align:top;border-bottom:1px solid var(--line)}
tr:last-child td{border-bottom:0}
th{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);background:#fafafa;font-weight:600}
tr.err td{background:#fff7f7}
.host{font-weight:600;white-space:nowrap}.sub{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
.agent{max-width:230px}
.badge{display:inline-block;padding:2px 8px;border-radius:6px;font-size:12px;font-weight:600;white-space:nowrap}
.persona{background:#f3f4f6;color:#374151}.persona.mdm{background:#ede9fe;color:#5b21b6}
.bar{width:130px;height:8px;border-radius:4px;background:#eef0f3;overflow:hidden;margin-top:5px}
.bar i{display:block;height:100%;background:var(--c)}
.step{font-size:12px;color:var(--muted)}
code{font:12px ui-monospace,SFMono-Regular,Menlo,"DejaVu Sans Mono",monospace;background:#f3f4f6;padding:1px 5px;border-radius:4px;margin:0 4px 3px 0;display:inline-block}
code.att{background:var(--ok-bg);color:var(--ok)}code.dev-bad{background:#ffedd5;color:#c2410c}
.stale{color:var(--warn);font-weight:600}
.when,th{white-space:nowrap}
.error{color:var(--bad);font-weight:500;white-space:pre-wrap;overflow-wrap:anywhere;max-width:440px;border-left:3px solid var(--bad);padding-left:8px}
.warning{color:var(--warn);white-space:pre-wrap;overflow-wrap:anywhere;max-width:440px;border-left:3px solid var(--warn);padding-left:8px}
.none{color:#9ca3af}
.empty{padding:28px;text-align:center;color:var(--muted);background:var(--card);border:1px dashed var(--line);border-radius:10px}
footer{margin-top:16px;color:var(--muted);font-size:12px}
footer a{color:var(--muted);margin-right:14px}
.filter{display:flex;gap:8px;align-items:center;margin:0 0 12px}
.filter input{flex:1;max-width:460px;padding:6px 10px;border:1px solid var(--line);border-radius:8px;font:inherit}
.filter button{padding:6px 14px;border:1px solid var(--line);border-radius:8px;background:var(--card);font:inherit;cursor:pointer}
.filter a,.pager a{color:var(--busy)}
a.chip{text-decoration:none}.chip.on{outline:2px solid currentColor}
.chip.persona{background:#f3f4f6;color:#374151}.chip.persona.mdm{background:#ede9fe;color:#5b21b6}
.sep{width:12px}
.pager{display:flex;gap:16px;align-items:center;margin-top:12px;color:var(--muted)}
#offline{display:none;margin-bottom:12px;padding:8px 12px;border-radius:8px;background:var(--warn-bg);color:var(--warn);font-weight:600}
"#;

/// Fetches the page's own content (same filter and page) and swaps it in: no reload, no
/// flicker. The server has escaped every value in it, so nothing is built from data here.
const SCRIPT: &str = r#"
(function(){
  var busy=false, q=location.search;
  var url=location.pathname+(q?q+'&':'?')+'partial=1';
  function tick(){
    if(busy) return; busy=true;
    fetch(url,{cache:'no-store'}).then(function(r){return r.text();}).then(function(t){
      document.getElementById('content').innerHTML=t;
      document.getElementById('offline').style.display='none';
    }).catch(function(){
      document.getElementById('offline').style.display='block';
    }).then(function(){busy=false;});
  }
  setInterval(tick, REFRESH);
})();
"#;

/// What the page shows: which nodes (filter) and which of them (window).
#[derive(Debug, Clone, Default)]
pub struct PageQuery {
    pub filter: Filter,
    pub window: Window,
}

impl PageQuery {
    /// `q`, `phase`, `persona`, `offset`, `limit`; an error names the parameter.
    pub fn parse(
        param: impl Fn(&str) -> Result<Option<String>, String> + Copy,
    ) -> Result<PageQuery, String> {
        Ok(PageQuery {
            filter: Filter::parse(param)?,
            window: Window::parse(param, PAGE_MAX_LIMIT)?,
        })
    }

    /// The page's link with this filter, showing from `offset`.
    fn href(&self, offset: usize) -> String {
        let f = &self.filter;
        let mut parts = Vec::new();
        if let Some(t) = &f.text {
            parts.push(format!("q={}", url_encode(t)));
        }
        if let Some(p) = f.phase {
            parts.push(format!("phase={}", p.as_str()));
        }
        if let Some(p) = f.persona {
            parts.push(format!("persona={}", p.as_str()));
        }
        if let Some(l) = self.window.limit {
            parts.push(format!("limit={l}"));
        }
        if offset > 0 {
            parts.push(format!("offset={offset}"));
        }
        format!("?{}", parts.join("&"))
    }
}

/// Percent-encodes a query value.
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The filter box: outside the refreshed content, so a refresh never wipes what is typed.
fn filter_form(out: &mut String, f: &Filter) {
    let _ = write!(
        out,
        "<form class=\"filter\" method=\"get\" role=\"search\">\
         <input type=\"search\" name=\"q\" value=\"{}\" aria-label=\"Filter nodes\" \
         placeholder=\"Filter by host, agent, phase, persona or error\">",
        esc(f.text.as_deref().unwrap_or(""))
    );
    if let Some(p) = f.phase {
        let _ = write!(out, "<input type=\"hidden\" name=\"phase\" value=\"{p}\">");
    }
    if let Some(p) = f.persona {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"persona\" value=\"{p}\">"
        );
    }
    out.push_str("<button type=\"submit\">Filter</button>");
    if !f.is_empty() {
        out.push_str("<a href=\"?\">Show all</a>");
    }
    out.push_str("</form>");
}

fn document(content: &str, filter: Option<&Filter>) -> String {
    let mut out = String::with_capacity(content.len() + 8192);
    out.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<title>Storage framework status</title>");
    let _ = write!(
        out,
        "<noscript><meta http-equiv=\"refresh\" content=\"{}\"></noscript>",
        REFRESH_MS / 1000 * 2
    );
    let _ = write!(
        out,
        "<style>{STYLE}{}{}</style></head><body><main>",
        super::page_health::STYLE,
        super::page_plan::STYLE
    );
    out.push_str(
        "<div id=\"offline\">Cannot reach the scheduler; showing the last state received. Retrying…</div>",
    );
    if let Some(f) = filter {
        filter_form(&mut out, f);
    }
    out.push_str("<div id=\"content\">");
    out.push_str(content);
    out.push_str("</div></main>");
    let _ = writeln!(
        out,
        "<script>{}</script></body></html>",
        SCRIPT.replace("REFRESH", &REFRESH_MS.to_string())
    );
    out
}

/// The page (or with `partial`, just its content) for a view.
pub fn render(
    v: &View,
    q: &PageQuery,
    now_ms: u64,
    state_warning: Option<&str>,
    partial: bool,
) -> String {
    let content = content(v, q, now_ms, state_warning);
    if partial {
        content
    } else {
        document(&content, Some(&q.filter))
    }
}

/// The page when the dispatcher does not answer.
pub fn render_unavailable(error: &str, detail: &str, partial: bool) -> String {
    let content = format!(
        "<header><h1>Storage framework<small>v{}</small></h1><span class=\"conn bad\"><span class=\"dot\"></span>{}</span></header>\
         <p class=\"empty\">{}</p>",
        esc(env!("CARGO_PKG_VERSION")),
        esc(error),
        esc(detail)
    );
    if partial {
        content
    } else {
        document(&content, None)
    }
}

fn content(v: &View, q: &PageQuery, now_ms: u64, state_warning: Option<&str>) -> String {
    let model = &v.model;
    let (rows, matched) = select(
        model.nodes.values(),
        &q.filter,
        &q.window,
        PAGE_DEFAULT_LIMIT,
    );
    let mut out = String::with_capacity(4096 + rows.len() * 900);
    header(&mut out, v);
    if let Some(note) = state_warning {
        // The operator must know that a relaunch loses the state.
        let _ = write!(out, "<p class=\"conn bad\">Warning: {}</p>", esc(note));
    }
    super::page_health::banner(&mut out, model);
    facts(&mut out, v);
    totals(
        &mut out,
        &Counts::of(model.nodes.values()),
        model.nodes.len(),
        q,
    );
    pools(&mut out, model);
    if model.nodes.is_empty() {
        out.push_str(
            "<p class=\"empty\">No nodes yet: the scheduler launches a storage executor on each agent as its offers arrive.</p>",
        );
    } else if rows.is_empty() {
        out.push_str("<p class=\"empty\">No node matches the filter on this page.</p>");
    } else {
        out.push_str(
            "<table><thead><tr><th>Node</th><th>Persona</th><th>Phase</th><th>Progress</th>\
             <th>Health</th><th>Devices</th><th>Last contact</th><th>Task</th><th>Error</th></tr></thead><tbody>",
        );
        for node in &rows {
            super::page_row::row(&mut out, node, model.target.generation, now_ms);
        }
        out.push_str("</tbody></table>");
    }
    pager(&mut out, q, rows.len(), matched, model.nodes.len());
    super::page_plan::section(&mut out, model);
    out.push_str(
        "<footer><a href=\"/api/state\">/api/state</a><a href=\"/api/plan\">/api/plan</a><a href=\"/api/health\">/api/health</a><a href=\"/metrics\">/metrics</a>\
         <a href=\"/health\">/health</a><a href=\"/version\">/version</a></footer>",
    );
    out
}

fn header(out: &mut String, v: &View) {
    let _ = write!(
        out,
        "<header><h1>Storage framework<small>v{}</small></h1>",
        esc(env!("CARGO_PKG_VERSION"))
    );
    if v.subscribed {
        out.push_str("<span class=\"conn ok\"><span class=\"dot\"></span>Subscribed</span>");
    } else {
        let _ = write!(
            out,
            "<span class=\"conn bad\"><span class=\"dot\"></span>Not subscribed: {}</span>",
            esc(v.disconnected_reason.as_deref().unwrap_or("connecting"))
        );
    }
    out.push_str("</header>");
}

fn facts(out: &mut String, v: &View) {
    let model = &v.model;
    let none = |what: &str| format!("<span class=\"none\">{what}</span>");
    let facts = [
        (
            "Framework",
            model
                .framework_id
                .as_deref()
                .map(esc)
                .unwrap_or_else(|| none("not registered yet")),
        ),
        (
            "Master",
            v.master
                .as_deref()
                .map(esc)
                .unwrap_or_else(|| none("none yet")),
        ),
        (
            "Offers",
            if v.suppressed {
                "suppressed (every agent covered)".into()
            } else {
                "open".into()
            },
        ),
        ("Nodes", model.nodes.len().to_string()),
        ("Attach queue", attach_queue(v, &none)),
        ("As of", esc(&utc(v.generated_ms))),
    ];
    out.push_str("<dl class=\"facts\">");
    for (name, value) in facts {
        let _ = write!(out, "<div><dt>{}</dt><dd>{value}</dd></div>", esc(name));
    }
    out.push_str("</dl>");
}

/// The gateway worker's attach queue: a large rollout's nodes wait there for minutes, with no
/// storage state of their own to show it.
fn attach_queue(v: &View, none: &dyn Fn(&str) -> String) -> String {
    let q = v.attach_queue;
    if q.is_idle() {
        return none("none waiting");
    }
    let mut s = format!("{} node(s) with the gateway worker", q.with_worker);
    if q.waiting > 0 {
        let _ = write!(s, ", {} waiting for its queue", q.waiting);
    }
    s
}

/// Counts per phase and per persona over every node; each a link that filters by it.
fn totals(out: &mut String, c: &Counts, nodes: usize, q: &PageQuery) {
    out.push_str("<div class=\"totals\">");
    let _ = write!(
        out,
        "<a class=\"chip total\" href=\"?\">nodes <b>{nodes}</b></a>"
    );
    let chip = |out: &mut String, class: &str, key: &str, name: &str, n: usize, on: bool| {
        let _ = write!(
            out,
            "<a class=\"chip {class}{}\" href=\"?{key}={name}\">{name} <b>{n}</b></a>",
            if on { " on" } else { "" }
        );
    };
    for (phase, n) in c.phases() {
        let on = q.filter.phase == Some(phase);
        chip(out, phase_class(phase), "phase", phase.as_str(), n, on);
    }
    out.push_str("<span class=\"sep\"></span>");
    for (persona, n) in c.personas() {
        let on = q.filter.persona == Some(persona);
        let class = if persona.is_mdm() {
            "persona mdm"
        } else {
            "persona"
        };
        chip(out, class, "persona", persona.as_str(), n, on);
    }
    if c.with_errors > 0 {
        let _ = write!(
            out,
            "<span class=\"chip bad\">with errors <b>{}</b></span>",
            c.with_errors
        );
    }
    out.push_str("</div>");
}

/// Where this page is among the matching nodes, with links to the pages around it.
fn pager(out: &mut String, q: &PageQuery, shown: usize, matched: usize, nodes: usize) {
    if nodes == 0 {
        return;
    }
    let range = q.window.range(matched, PAGE_DEFAULT_LIMIT);
    let limit = q.window.limit.unwrap_or(PAGE_DEFAULT_LIMIT);
    out.push_str("<nav class=\"pager\">");
    if shown > 0 {
        let _ = write!(
            out,
            "<span>Showing {}–{} of {matched} {}</span>",
            range.start + 1,
            range.start + shown,
            if q.filter.is_empty() {
                "nodes".to_string()
            } else {
                format!("matching nodes ({nodes} in all)")
            }
        );
    } else {
        let _ = write!(
            out,
            "<span>{matched} matching nodes ({nodes} in all)</span>"
        );
    }
    if range.start > 0 {
        let _ = write!(
            out,
            "<a rel=\"prev\" href=\"{}\">‹ Previous</a>",
            esc(&q.href(range.start.saturating_sub(limit)))
        );
    }
    if range.end < matched {
        let _ = write!(
            out,
            "<a rel=\"next\" href=\"{}\">Next ›</a>",
            esc(&q.href(range.end))
        );
    }
    out.push_str("</nav>");
}
/// A bar per storage pool (use of its usable capacity), red above the threshold.
fn pools(out: &mut String, model: &crate::scheduler::model::ClusterModel) {
    if model.pools.is_empty() {
        return;
    }
    out.push_str("<div class=\"pools\">");
    for p in &model.pools {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let _ = write!(
            out,
            "<div class=\"pool{}\"><span>Pool <b>{}/{}</b></span>\
             <span class=\"bar\" title=\"{:.1}% used\"><i style=\"width:{:.1}%\"></i></span>\
             <span>{:.1} of {:.1} GiB used, {:.1} GiB available{}</span></div>",
            if p.over_threshold { " over" } else { "" },
            esc(&p.protection_domain),
            esc(&p.pool),
            p.used_pct,
            p.used_pct.clamp(0.0, 100.0),
            gib(p.used_bytes),
            gib(p.capacity_bytes),
            gib(p.available_bytes),
            if p.over_threshold {
                " <b>above threshold</b>"
            } else {
                ""
            }
        );
    }
    out.push_str("</div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::page_row::{devices_cell, row, task_cell};
    use crate::scheduler::model::Node;

    #[test]
    fn a_node_out_of_relaunches_says_it_waits_for_a_retry() {
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        n.failures = 5;
        let mut html = String::new();
        task_cell(&mut html, &n, 10);
        assert!(html.contains("5 failed launches"), "{html}");
        assert!(!html.contains("not relaunched"), "{html}");
        n.relaunch_stopped = true;
        html.clear();
        task_cell(&mut html, &n, 10);
        assert!(html.contains("not relaunched until retried"), "{html}");
    }

    #[test]
    fn pools_show_a_bar_flagged_above_the_threshold() {
        let mut model = crate::scheduler::model::ClusterModel::default();
        model.pools.push(crate::scheduler::model::PoolCapacity {
            protection_domain: "pd<1>".into(),
            pool: "sp".into(),
            capacity_bytes: 10 << 30,
            used_bytes: 9 << 30,
            used_pct: 90.0,
            over_threshold: true,
            ..Default::default()
        });
        let mut html = String::new();
        pools(&mut html, &model);
        assert!(html.contains("class=\"pool over\""), "{html}");
        assert!(html.contains("width:90.0%"), "{html}");
        assert!(html.contains("pd&lt;1&gt;/sp"), "{html}");
        assert!(html.contains("above threshold"), "{html}");
        model.pools[0].over_threshold = false;
        let mut html = String::new();
        pools(&mut html, &model);
        assert!(!html.contains("above threshold"), "{html}");
    }

    /// A node's non-fatal warning shows in its row, an error takes precedence.
    #[test]
    fn a_warning_shows_in_the_row_unless_an_error_does() {
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        n.warning = Some("REX-Ray <no> credentials".into());
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(
            html.contains("<div class=\"warning\">REX-Ray &lt;no&gt; credentials</div>"),
            "{html}"
        );
        n.last_error = Some("boom".into());
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(
            html.contains("boom") && !html.contains("credentials"),
            "{html}"
        );
    }

    /// A node under a Mesos maintenance window says in its row whether its machine may go,
    /// and why not.
    #[test]
    fn a_maintenance_window_shows_in_the_row_with_why_it_is_declined() {
        use crate::scheduler::model::maintenance::{MaintenanceAnswer, NodeMaintenance};
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(!html.contains("maintenance"), "{html}");
        n.maintenance = Some(Box::new(NodeMaintenance {
            answer: MaintenanceAnswer::Declined,
            reason: Some("waiting: h2 of <pd> is drained".into()),
            start_ms: 0,
            duration_ms: None,
            since_ms: 0,
            drained_task: None,
        }));
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(
            html.contains("maintenance declined: waiting: h2 of &lt;pd&gt; is drained"),
            "{html}"
        );
    }

    /// A device missing from the host or in error at the gateway is flagged in its row, by
    /// path; the others keep their marks.
    #[test]
    fn missing_and_failed_devices_are_flagged_in_the_row() {
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        n.devices = vec!["/dev/sdb".into(), "/dev/sdc".into(), "/dev/sdd".into()];
        n.attached = n.devices.clone();
        n.devices_missing = vec!["/dev/sdd".into()].into();
        n.device_errors = vec!["/dev/sdc".into(), "/dev/sdd".into()].into();
        let mut html = String::new();
        devices_cell(&mut html, &n);
        for want in [
            "<code class=\"att\" title=\"attached to the storage cluster\">/dev/sdb ✓</code>",
            "<code class=\"dev-bad\" title=\"in error at the gateway\">/dev/sdc in error</code>",
            "<code class=\"dev-bad\" title=\"missing from the host\">/dev/sdd missing</code>",
        ] {
            assert!(html.contains(want), "{want} not in {html}");
        }
    }

    /// A node whose day-two step waits says why in its own row, escaped.
    #[test]
    fn a_node_taken_out_says_so_in_its_row() {
        use crate::scheduler::model::Removal;
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        n.phase = Phase::Running;
        n.removal = Some(Removal::Draining);
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(
            html.contains("decommissioning: its SDS's data moves away"),
            "{html}"
        );
        n.removal = None;
        n.decommissioned = true;
        let mut html = String::new();
        row(&mut html, &n, 0, 0);
        assert!(
            html.contains("decommissioned: never launched until recommissioned"),
            "{html}"
        );
    }

    #[test]
    fn a_waiting_step_shows_in_the_row() {
        use crate::scheduler::model::{NodeRollout, Step, StepState, StepStatus};
        let mut n = Node::new("a1", "h1", crate::scheduler::model::Persona::Data, 0);
        n.phase = Phase::Running;
        n.rollout = Some(Box::new(NodeRollout {
            generation: 2,
            steps: vec![StepStatus {
                state: StepState::Waiting,
                reason: Some("waiting: sds-2 of <pd1> is rebuilding".into()),
                ..StepStatus::pending(Step::UpgradeSds)
            }],
            granted: None,
        }));
        let mut html = String::new();
        row(&mut html, &n, 2, 0);
        assert!(
            html.contains("upgrade-sds waiting: sds-2 of &lt;pd1&gt; is rebuilding</div></td>"),
            "{html}"
        );
    }

    #[test]
    fn the_page_of_ten_thousand_nodes_is_bounded() {
        let mut model = crate::scheduler::model::ClusterModel::default();
        for i in 0..10_000 {
            let mut n = Node::new(
                &format!("agent-id-{i}"),
                &format!("agent-{i}.dc1.example.com"),
                crate::scheduler::model::Persona::Data,
                0,
            );
            n.devices = vec!["/dev/sdb".into(), "/dev/sdc".into()];
            n.last_error = (i % 1000 == 999).then(|| "packages: failed".into());
            n.phase = if n.last_error.is_some() {
                Phase::Failed
            } else {
                Phase::Running
            };
            model.nodes.insert(n.agent_id.clone(), n);
        }
        let v = View {
            subscribed: true,
            master: None,
            disconnected_reason: None,
            suppressed: true,
            attach_queue: crate::scheduler::gateway_work::report::AttachQueue {
                with_worker: 256,
                waiting: 9_744,
            },
            model,
            generated_ms: 0,
            generation: 1,
            events: Default::default(),
        };
        let html = render(&v, &PageQuery::default(), 0, None, false);
        assert!(html.len() < 150_000, "{} bytes", html.len());
        assert!(html.contains(
            "<dt>Attach queue</dt><dd>256 node(s) with the gateway worker, 9744 waiting for its queue</dd>"
        ));
        let (table, plan) = html.split_at(html.find("<section id=\"plan\">").unwrap());
        assert_eq!(table.matches("<tr").count(), 101, "a header and 100 rows");
        assert_eq!(
            plan.matches("<tr class=\"plan-failed\"").count(),
            10,
            "the plan shows the failed installs"
        );
        assert!(html.contains("Showing 1–100 of 10000 nodes"));
        // The ten failed nodes lead, in natural order.
        let first = table.find("agent-999.dc1").unwrap();
        assert!(first < table.find("agent-1999.dc1").unwrap());
        assert!(table.find("agent-9999.dc1").unwrap() < table.find("agent-0.dc1").unwrap());
        assert!(!html.contains("agent-5000.dc1"));
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(ago(10_000, 10_000), "just now");
        assert_eq!(ago(22_000, 10_000), "12 s ago");
        assert_eq!(ago(10_000 + 300_000, 10_000), "5 min ago");
        assert_eq!(ago(10_000, 20_000), "just now");
        assert_eq!(ago(3 * 86_400_000, 0), "3 d ago");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_709_251_199_000), "2024-02-29 23:59:59 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
