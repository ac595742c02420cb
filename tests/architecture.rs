//! The module layers of ARCHITECTURE.md: `rest -> scheduler -> {gateway, mesos, store}` and
//! `gateway -> mesos`, with the leaf modules (`backoff`, `clock`, `hash`, `secret`, and
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
        ("secret", &[][..]),
        // Built into the executor too: it may use leaves only.
        ("contract", &["secret"][..]),
        ("mesos", &["contract"][..]),
        // The store keeps keyed records and knows nothing of the model it holds.
        ("store", &["hash", "contract"][..]),
        ("gateway", &["mesos", "backoff", "secret", "contract"][..]),
        (
            "scheduler",
            &[
                "mesos", "store", "gateway", "backoff", "clock", "hash", "secret", "contract",
            ][..],
        ),
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
                "contract",
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
