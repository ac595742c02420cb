//! The module layers of ARCHITECTURE.md: `rest -> scheduler -> {gateway, mesos, store}` and
//! `gateway -> mesos`, with the leaf modules (`backoff`, `clock`, `hash`, `secret`, `sha256`, `tls`, and
//! `contract`, the scheduler-executor contract, which uses only leaves) below all of them. A `crate::` path in a file that points up or sideways against these arrows fails
//! this test, so the import graph between the top-level modules stays free of cycles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules it may use.
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("backoff", &[][..]),
        ("clock", &[][..]),
        ("hash", &[][..]),
        ("secret", &["sha256"][..]),
        ("sha256", &[][..]),
        ("resolver", &[][..]),
        // Fingerprints, pinning and the TLS agent: shared by both binaries.
        ("tls", &["sha256", "resolver"][..]),
        // Built into the executor too: it may use leaves only.
        ("contract", &["secret"][..]),
        ("mesos", &["contract", "resolver"][..]),
        // The store keeps keyed records and knows nothing of the model it holds.
        ("store", &["hash", "secret", "contract"][..]),
        (
            "gateway",
            &["mesos", "backoff", "secret", "contract", "tls"][..],
        ),
        (
            "scheduler",
            &[
                "mesos", "store", "gateway", "backoff", "clock", "hash", "secret", "sha256",
                "contract", "tls",
            ][..],
        ),
        // The operators' client (`storage-scheduler ctl`): the operator paths, the TLS
        // pieces, the gateway's CA-file check.
        ("cli", &["scheduler", "gateway", "secret", "tls"][..]),
        (
            "rest",
            // `store`: only the "state dies with the sandbox" note for /health and the page.
            &[
                "scheduler",
                "store",
                "mesos",
                "clock",
                "hash",
                "secret",
                "sha256",
                "contract",
                "tls",
            ][..],
        ),
    ])
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level modules named by `crate::<module>` anywhere in `text`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let before = text[..i].chars().last();
        // `$crate::` in macros is the crate itself, not a path into a module.
        if before == Some('$') || before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = text[i + "crate::".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

/// (module, the module it uses) for every arrow in src/.
fn arrows() -> BTreeSet<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut out = BTreeSet::new();
    for f in all {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may build fixtures from higher layers (a store's tests save a real
        // model); the layers bind the code that ships.
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        for used in uses(&text) {
            if used != module {
                out.insert((module.clone(), used));
            }
        }
    }
    out
}

#[test]
fn imports_follow_the_layers() {
    let allowed = allowed();
    let arrows = arrows();
    assert!(
        arrows.iter().any(|(a, b)| a == "rest" && b == "scheduler"),
        "the scan found no rest -> scheduler arrow: it reads nothing"
    );
    let wrong: Vec<String> = arrows
        .iter()
        // `crate::message!` and the like are macros at the crate root, not modules.
        .filter(|(_, to)| allowed.contains_key(to.as_str()))
        .filter(|(from, to)| {
            !allowed
                .get(from.as_str())
                .is_some_and(|ok| ok.contains(&to.as_str()))
        })
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(wrong.is_empty(), "imports against the layers: {wrong:?}");
}

#[test]
fn the_scan_sees_macros_and_paths() {
    let u = uses("use crate::scheduler::x; $crate::mesos::proto; f(crate::store::open)");
    assert_eq!(
        u.into_iter().collect::<Vec<_>>(),
        ["scheduler".to_string(), "store".to_string()]
    );
}

/// Inside `scheduler/`: submodule -> the sibling submodules it may use. `mod.rs` (the
/// start-up steps) and `wiring.rs` (the threads) sit above all of them; leaves use none.
fn scheduler_allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("exit", &[][..]),
        ("stop", &[][..]),
        ("metrics", &[][..]),
        ("flags", &[][..]),
        ("model", &[][..]),
        // Pure: the operator's commands and their outcomes.
        ("operator", &[][..]),
        ("identity", &["flags"][..]),
        ("executor_binary", &[][..]),
        ("placement", &["model"][..]),
        ("node_plan", &["model", "flags"][..]),
        ("persist", &["model", "flags", "exit"][..]),
        // What the REST server and the dispatcher exchange: data, no behaviour of either.
        // `gateway_work`: only the gateway worker's report type, a leaf (`gateway_work/report.rs`).
        (
            "exchange",
            &[
                "model",
                "metrics",
                "gateway_work",
                "executor_binary",
                "operator",
            ][..],
        ),
        ("signals", &["exchange", "exit"][..]),
        ("standin", &["exchange", "model", "operator"][..]),
        ("master", &["exchange", "flags", "metrics", "stop"][..]),
        ("gateway_work", &["model", "flags", "metrics"][..]),
        // Pure: the health model reads the model and the gateway worker's poll report.
        ("health", &["model", "gateway_work"][..]),
        // Pure: the lifecycle's decisions, on the model and the health gate.
        ("rollout", &["model", "health"][..]),
        (
            "dispatcher",
            &[
                "exchange",
                "master",
                "metrics",
                "model",
                "node_plan",
                "persist",
                "placement",
                "gateway_work",
                "health",
                "rollout",
                "operator",
                "flags",
                "executor_binary",
            ][..],
        ),
        (
            "teardown",
            &["exit", "flags", "master", "model", "persist"][..],
        ),
        (
            "wiring",
            &[
                "dispatcher",
                "exchange",
                "flags",
                "master",
                "metrics",
                "model",
                "node_plan",
                "persist",
                "placement",
                "gateway_work",
                "health",
                "rollout",
                "executor_binary",
            ][..],
        ),
    ])
}

/// Code without comments, and without the unit tests (which may build fixtures from anywhere).
fn shipped_code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (submodule of `scheduler`, what it names) for every `crate::scheduler::<name>` in a file
/// under `src/scheduler/<submodule>`, and every `super::<name>` in a file directly in
/// `src/scheduler/` (where `super` is the scheduler's own `mod.rs`).
fn scheduler_arrows() -> BTreeSet<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheduler");
    let mut all = Vec::new();
    files(&dir, &mut all);
    let mut out = BTreeSet::new();
    for f in all {
        let rel = f.strip_prefix(&dir).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "mod" {
            continue;
        }
        let text = shipped_code(&std::fs::read_to_string(&f).unwrap());
        let mut names = BTreeSet::new();
        for (i, _) in text.match_indices("crate::scheduler::") {
            names.insert(ident_at(&text[i + "crate::scheduler::".len()..]));
        }
        if rel.components().count() == 1 {
            for (i, _) in text.match_indices("super::") {
                let before = text[..i].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                names.insert(ident_at(&text[i + "super::".len()..]));
            }
        }
        for name in names {
            if !name.is_empty() && name != module {
                out.insert((module.clone(), name));
            }
        }
    }
    out
}

fn ident_at(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn scheduler_submodules_follow_their_layers() {
    let allowed = scheduler_allowed();
    let arrows = scheduler_arrows();
    assert!(
        arrows
            .iter()
            .any(|(a, b)| a == "dispatcher" && b == "model"),
        "the scan found no dispatcher -> model arrow: it reads nothing"
    );
    let wrong: Vec<String> = arrows
        .iter()
        .filter(|(from, to)| {
            !allowed
                .get(from.as_str())
                .is_some_and(|ok| ok.contains(&to.as_str()))
        })
        .map(|(from, to)| {
            if allowed.contains_key(to.as_str()) {
                format!("{from} -> {to} (against the layers)")
            } else {
                // An item of `scheduler/mod.rs` itself, or a module the table does not know.
                format!("{from} -> {to} (upward into scheduler/mod.rs, or an unknown module)")
            }
        })
        .collect();
    assert!(wrong.is_empty(), "scheduler imports: {wrong:?}");
}

#[test]
fn the_scheduler_layers_have_no_circle() {
    let allowed = scheduler_allowed();
    // Depth-first search for a back edge.
    fn visit<'a>(
        m: &'a str,
        allowed: &BTreeMap<&'a str, &'a [&'a str]>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(m) {
            return;
        }
        assert!(!path.contains(&m), "circle: {path:?} -> {m}");
        path.push(m);
        for next in allowed.get(m).copied().unwrap_or_default() {
            visit(next, allowed, path, done);
        }
        path.pop();
        done.insert(m);
    }
    let mut done = BTreeSet::new();
    for m in allowed.keys() {
        visit(m, &allowed, &mut Vec::new(), &mut done);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheduler");
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let module = name.trim_end_matches(".rs");
        if module != "mod" {
            assert!(
                allowed.contains_key(module),
                "scheduler/{name} has no row in scheduler_allowed(): give it its layer"
            );
        }
    }
}

/// Longest function and largest module (non-blank, non-comment lines before the unit tests)
/// that the shipped code may have; a file over either says why in a `//! size:` line.
const MAX_FN_LINES: usize = 80;
const MAX_MODULE_LINES: usize = 600;

/// A line with its string and char literals blanked and its `//` comment cut, so that braces
/// inside them are not counted.
fn code_of(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A char literal ('x', '\n', '{') or a lifetime ('a): only the former is skipped.
                let rest: String = chars.clone().take(3).collect();
                let literal = rest.starts_with('\\') || rest.chars().nth(1) == Some('\'');
                if literal {
                    for d in chars.by_ref() {
                        if d == '\'' {
                            break;
                        }
                    }
                    out.push_str("''");
                } else {
                    out.push(c);
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// (name, lines) of every function in `text` longer than `MAX_FN_LINES`.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<String> = text.lines().map(code_of).collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("fn ") else {
            continue;
        };
        let before = line[..at].trim();
        let starts_item = before.is_empty()
            || before.split_whitespace().all(|w| {
                [
                    "pub",
                    "pub(crate)",
                    "pub(super)",
                    "const",
                    "unsafe",
                    "async",
                ]
                .contains(&w)
            });
        if !starts_item {
            continue;
        }
        let name = ident_at(&line[at + 3..]);
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            if !opened && l.contains(';') && !l.contains('{') {
                break; // a declaration without a body
            }
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                let n = j - i + 1;
                if n > MAX_FN_LINES {
                    out.push((name.clone(), n));
                }
                break;
            }
        }
    }
    out
}

fn module_lines(text: &str) -> usize {
    shipped_code(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

#[test]
fn no_function_or_module_is_too_long() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    files(&root.join("executor/src"), &mut all);
    assert!(all.len() > 50, "the scan found only {} files", all.len());
    let mut wrong = Vec::new();
    for f in all {
        let text = std::fs::read_to_string(&f).unwrap();
        if text.lines().take(12).any(|l| l.starts_with("//! size:")) {
            continue;
        }
        let shown = f.strip_prefix(root).unwrap().display().to_string();
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        for (name, n) in long_functions(code) {
            wrong.push(format!(
                "{shown}: fn {name} has {n} lines (at most {MAX_FN_LINES})"
            ));
        }
        let n = module_lines(&text);
        if n > MAX_MODULE_LINES {
            wrong.push(format!(
                "{shown}: {n} lines of code (at most {MAX_MODULE_LINES})"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "too long, or say why in a `//! size:` line: {wrong:#?}"
    );
}

#[test]
fn the_size_scan_sees_functions_and_ignores_braces_in_literals() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let text =
        format!("pub fn big() {{\n{body}}}\nfn small() {{ let s = \"}}\"; let c = '{{'; }}\n");
    assert_eq!(
        long_functions(&text),
        [("big".to_string(), MAX_FN_LINES + 2)]
    );
    assert!(long_functions("fn f<'a>(x: &'a str) { let _ = x; }\n").is_empty());
}
