//! Pure: pages of nodes for `/api/state` and the status page, so that
//! what one response holds is bounded however large the cluster is. Query parsing, natural
//! order, the page's node selection and the counts per phase and persona; no I/O.

use crate::scheduler::model::{Node, Persona, Phase};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// `/api/state` keeps its whole shape (every node, no `page`) up to this many nodes; above
/// it, a request without `limit` gets the first page of this many.
pub const STATE_DEFAULT_LIMIT: usize = 1000;
/// The most nodes one `/api/state` page may ask for.
pub const STATE_MAX_LIMIT: usize = 1000;
/// Rows of the status page (the page of 10,000 nodes stays about 100 KB).
pub const PAGE_DEFAULT_LIMIT: usize = 100;
/// The most rows a status page may ask for.
pub const PAGE_MAX_LIMIT: usize = 500;

/// `offset` and `limit` as a request gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    pub offset: Option<usize>,
    pub limit: Option<usize>,
}

impl Window {
    /// Reads `offset` and `limit` through `param` (the request's query); an error names the
    /// parameter and what is wrong with it.
    pub fn parse(
        param: impl Fn(&str) -> Result<Option<String>, String>,
        max_limit: usize,
    ) -> Result<Window, String> {
        let number = |name: &str| -> Result<Option<usize>, String> {
            let Some(v) = param(name).map_err(|e| format!("{name}: {e}"))? else {
                return Ok(None);
            };
            v.trim()
                .parse::<usize>()
                .map(Some)
                .map_err(|_| format!("{name}: {v:?} is not a whole number of nodes"))
        };
        let offset = number("offset")?;
        let limit = number("limit")?;
        if let Some(l) = limit {
            if l == 0 || l > max_limit {
                return Err(format!("limit: {l} is not between 1 and {max_limit}"));
            }
        }
        Ok(Window { offset, limit })
    }

    /// The range of `total` items this window shows, with `default_limit` when none was
    /// asked for. An offset past the end gives an empty range, not an error: the totals
    /// tell the client where the end is.
    pub fn range(&self, total: usize, default_limit: usize) -> std::ops::Range<usize> {
        let start = self.offset.unwrap_or(0).min(total);
        let end = start
            .saturating_add(self.limit.unwrap_or(default_limit))
            .min(total);
        start..end
    }
}

/// Compares as people read names with numbers: `agent-2` before `agent-11`. Runs of digits
/// compare by value (leading zeros aside), everything else byte by byte; names equal that
/// way (`a01`, `a1`) fall back to plain order, so the order is total.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        if x[i].is_ascii_digit() && y[j].is_ascii_digit() {
            let (si, sj) = (i, j);
            while i < x.len() && x[i].is_ascii_digit() {
                i += 1;
            }
            while j < y.len() && y[j].is_ascii_digit() {
                j += 1;
            }
            let trim = |s: &[u8]| {
                let zeros = s.iter().take_while(|&&c| c == b'0').count();
                s[zeros..].to_vec()
            };
            let (dx, dy) = (trim(&x[si..i]), trim(&y[sj..j]));
            let by_value = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(&dy));
            if by_value != Ordering::Equal {
                return by_value;
            }
        } else {
            if x[i] != y[j] {
                return x[i].cmp(&y[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (x.len() - i).cmp(&(y.len() - j)).then_with(|| a.cmp(b))
}

/// Which nodes the status page lists: a text (host, agent id, phase, persona or error
/// contains it, ignoring case) and an exact phase and persona.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub text: Option<String>,
    pub phase: Option<Phase>,
    pub persona: Option<Persona>,
}

impl Filter {
    /// Reads `q`, `phase` and `persona`; an unknown phase or persona is an error naming it.
    pub fn parse(param: impl Fn(&str) -> Result<Option<String>, String>) -> Result<Filter, String> {
        let get = |name: &str| -> Result<Option<String>, String> {
            Ok(param(name)
                .map_err(|e| format!("{name}: {e}"))?
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty()))
        };
        let phase = match get("phase")? {
            None => None,
            Some(p) => {
                Some(Phase::parse(&p).ok_or_else(|| format!("phase: {p:?} is not a phase"))?)
            }
        };
        let persona = match get("persona")? {
            None => None,
            Some(p) => {
                Some(Persona::parse(&p).ok_or_else(|| format!("persona: {p:?} is not a persona"))?)
            }
        };
        Ok(Filter {
            text: get("q")?.map(|t| t.to_lowercase()),
            phase,
            persona,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_none() && self.phase.is_none() && self.persona.is_none()
    }

    pub fn matches(&self, n: &Node) -> bool {
        if self.phase.is_some_and(|p| p != n.phase) || self.persona.is_some_and(|p| p != n.persona)
        {
            return false;
        }
        let Some(t) = &self.text else { return true };
        let has = |s: &str| s.to_lowercase().contains(t.as_str());
        has(&n.hostname)
            || has(&n.agent_id)
            || has(n.phase.as_str())
            || has(n.persona.as_str())
            || n.last_error.as_deref().is_some_and(has)
    }
}

/// Failed nodes first, then nodes with an error, lost or degraded, then the rest.
fn attention(n: &Node) -> u8 {
    match n.phase {
        Phase::Failed => 0,
        Phase::Lost => 1,
        _ if n.last_error.is_some() => 1,
        _ if n.health.state == crate::scheduler::model::HealthState::Degraded => 1,
        _ => 2,
    }
}

/// The status page's order: failed first, then by host name in natural order.
pub fn page_order(a: &Node, b: &Node) -> Ordering {
    attention(a)
        .cmp(&attention(b))
        .then_with(|| natural_cmp(&a.hostname, &b.hostname))
        .then_with(|| a.agent_id.cmp(&b.agent_id))
}

/// One page of the nodes that match: the rows to show and how many matched in all.
pub fn select<'a>(
    nodes: impl Iterator<Item = &'a Node>,
    filter: &Filter,
    window: &Window,
    default_limit: usize,
) -> (Vec<&'a Node>, usize) {
    let mut matched: Vec<&Node> = nodes.filter(|n| filter.matches(n)).collect();
    let total = matched.len();
    let range = window.range(total, default_limit);
    // Only the page needs its exact order: partition around it, then sort just the page.
    if range.end < total {
        matched.select_nth_unstable_by(range.end, |a, b| page_order(a, b));
        matched.truncate(range.end);
    }
    if range.start > 0 && range.start < matched.len() {
        matched.select_nth_unstable_by(range.start, |a, b| page_order(a, b));
    }
    let mut page = matched.split_off(range.start.min(matched.len()));
    page.sort_unstable_by(|a, b| page_order(a, b));
    (page, total)
}

/// Nodes per phase (in phase order) and per persona, over every node.
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub phase: BTreeMap<&'static str, usize>,
    pub persona: BTreeMap<&'static str, usize>,
    pub with_errors: usize,
}

impl Counts {
    pub fn of<'a>(nodes: impl Iterator<Item = &'a Node>) -> Counts {
        let mut c = Counts::default();
        for n in nodes {
            *c.phase.entry(n.phase.as_str()).or_default() += 1;
            *c.persona.entry(n.persona.as_str()).or_default() += 1;
            c.with_errors += usize::from(n.last_error.is_some());
        }
        c
    }

    /// Phases with nodes, in install order.
    pub fn phases(&self) -> impl Iterator<Item = (Phase, usize)> + '_ {
        Phase::ALL
            .into_iter()
            .filter_map(|p| Some((p, *self.phase.get(p.as_str())?)))
    }

    /// Personas with nodes, MDMs first.
    pub fn personas(&self) -> impl Iterator<Item = (Persona, usize)> + '_ {
        [
            Persona::Primary,
            Persona::Secondary,
            Persona::Tiebreaker,
            Persona::Data,
        ]
        .into_iter()
        .filter_map(|p| Some((p, *self.persona.get(p.as_str())?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, phase: Phase) -> Node {
        Node {
            phase,
            ..Node::new(&format!("id-{host}"), host, Persona::Data, 0)
        }
    }

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut hosts = vec![
            "agent-11",
            "agent-2",
            "agent-1",
            "agent-10",
            "agent-02",
            "Agent-3",
            "agent-",
            "agent-2a",
            "agent-2.dc1",
            "b",
            "a100b2",
            "a100b10",
        ];
        hosts.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            hosts,
            [
                "Agent-3",
                "a100b2",
                "a100b10",
                "agent-",
                "agent-1",
                "agent-02",
                "agent-2",
                "agent-2.dc1",
                "agent-2a",
                "agent-10",
                "agent-11",
                "b"
            ]
        );
        assert_eq!(natural_cmp("x", "x"), Ordering::Equal);
        assert_eq!(natural_cmp("x9", "x10"), Ordering::Less);
        assert_eq!(natural_cmp("x0010", "x9"), Ordering::Greater);
        // Longer than any integer type.
        assert_eq!(
            natural_cmp("n99999999999999999999999", "n100000000000000000000000"),
            Ordering::Less
        );
    }

    #[test]
    fn window_bounds() {
        let q = |s: &'static str| {
            move |name: &str| -> Result<Option<String>, String> {
                Ok(s.split('&')
                    .filter_map(|p| p.split_once('='))
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_owned()))
            }
        };
        assert_eq!(Window::parse(q(""), 1000).unwrap(), Window::default());
        let w = Window::parse(q("offset=20&limit=10"), 1000).unwrap();
        assert_eq!(w.range(25, 100), 20..25);
        assert_eq!(w.range(100, 100), 20..30);
        assert_eq!(
            w.range(5, 100),
            5..5,
            "an offset past the end is an empty page"
        );
        assert_eq!(Window::default().range(3, 100), 0..3);
        assert_eq!(Window::default().range(300, 100), 0..100);
        let huge = Window {
            offset: Some(usize::MAX),
            limit: Some(usize::MAX),
        };
        assert_eq!(huge.range(7, 100), 7..7);
        for (query, needle) in [
            ("limit=0", "limit: 0 is not between 1 and 1000"),
            ("limit=1001", "limit: 1001"),
            ("limit=-1", "limit: \"-1\""),
            ("offset=x", "offset: \"x\" is not a whole number"),
            ("offset=1.5", "offset"),
        ] {
            let e = Window::parse(q(query), 1000).unwrap_err();
            assert!(e.contains(needle), "{query}: {e}");
        }
    }

    #[test]
    fn degraded_nodes_come_with_the_ones_in_error_unknown_ones_with_the_rest() {
        use crate::scheduler::model::Health;
        let mut nodes: Vec<Node> = (1..=6)
            .map(|i| node(&format!("agent-{i}"), Phase::Running))
            .collect();
        nodes[5].health = Health::degraded(vec!["SDS sds-6 disconnected from the MDM".into()]);
        nodes[3].last_error = Some("disk".into());
        nodes[0].health = Health::unknown("no gateway data for 200s");
        nodes[1].health = Health::healthy();
        let (page, _) = select(nodes.iter(), &Filter::default(), &Window::default(), 10);
        let hosts: Vec<&str> = page.iter().map(|n| n.hostname.as_str()).collect();
        assert_eq!(
            hosts,
            ["agent-4", "agent-6", "agent-1", "agent-2", "agent-3", "agent-5"]
        );
    }

    #[test]
    fn pages_put_failed_nodes_first_then_natural_order() {
        let mut nodes: Vec<Node> = (1..=25)
            .map(|i| node(&format!("agent-{i}"), Phase::Running))
            .collect();
        nodes[19].phase = Phase::Failed; // agent-20
        nodes[4].last_error = Some("disk".into()); // agent-5
        let all = |w: Window| {
            let (page, total) = select(nodes.iter(), &Filter::default(), &w, 10);
            let hosts: Vec<String> = page.iter().map(|n| n.hostname.clone()).collect();
            (hosts, total)
        };
        let (first, total) = all(Window::default());
        assert_eq!(total, 25);
        assert_eq!(
            first,
            [
                "agent-20", "agent-5", "agent-1", "agent-2", "agent-3", "agent-4", "agent-6",
                "agent-7", "agent-8", "agent-9"
            ]
        );
        let (second, _) = all(Window {
            offset: Some(10),
            limit: None,
        });
        assert_eq!(second[0], "agent-10");
        assert_eq!(second.len(), 10);
        let (last, _) = all(Window {
            offset: Some(20),
            limit: Some(10),
        });
        assert_eq!(
            last,
            ["agent-21", "agent-22", "agent-23", "agent-24", "agent-25"]
        );
        let (none, total) = all(Window {
            offset: Some(99),
            limit: None,
        });
        assert!(none.is_empty());
        assert_eq!(total, 25);
        // Pages cover every node exactly once.
        let mut seen: Vec<String> = (0..3)
            .flat_map(|p| {
                all(Window {
                    offset: Some(p * 10),
                    limit: None,
                })
                .0
            })
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
    }

    #[test]
    fn filters_and_counts() {
        let mut nodes = [
            node("agent-1", Phase::Running),
            node("agent-2", Phase::Packages),
            node("other-3", Phase::Failed),
        ];
        nodes[1].persona = Persona::Primary;
        nodes[2].last_error = Some("SDS Install FAILED".into());
        let hosts = |f: Filter| {
            select(nodes.iter(), &f, &Window::default(), 10)
                .0
                .iter()
                .map(|n| n.hostname.as_str())
                .collect::<Vec<_>>()
        };
        let text = |t: &str| Filter {
            text: Some(t.to_lowercase()),
            ..Filter::default()
        };
        assert_eq!(hosts(text("AGENT")), ["agent-1", "agent-2"]);
        assert_eq!(hosts(text("sds install")), ["other-3"]);
        assert_eq!(hosts(text("primary")), ["agent-2"]);
        let phase = Filter {
            phase: Some(Phase::Packages),
            ..Filter::default()
        };
        assert_eq!(hosts(phase), ["agent-2"]);
        let c = Counts::of(nodes.iter());
        assert_eq!(
            c.phases().collect::<Vec<_>>(),
            [
                (Phase::Packages, 1),
                (Phase::Running, 1),
                (Phase::Failed, 1)
            ]
        );
        assert_eq!(
            c.personas().collect::<Vec<_>>(),
            [(Persona::Primary, 1), (Persona::Data, 2)]
        );
        assert_eq!(c.with_errors, 1);
        let q = |s: &'static str| {
            move |name: &str| -> Result<Option<String>, String> {
                Ok(s.split_once('=')
                    .filter(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_owned()))
            }
        };
        assert!(Filter::parse(q("phase=dancing"))
            .unwrap_err()
            .contains("phase: \"dancing\""));
        assert!(Filter::parse(q("persona=mdm"))
            .unwrap_err()
            .contains("persona: \"mdm\""));
        assert_eq!(
            Filter::parse(q("phase=failed")).unwrap().phase,
            Some(Phase::Failed)
        );
        assert!(Filter::parse(q("q=")).unwrap().is_empty());
    }
}
