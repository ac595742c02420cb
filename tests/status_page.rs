//! The status page in a real browser: headless Chromium loads it from a REST server whose
//! dispatcher is a fake with five nodes (one failed with an error), the test checks the
//! rendered DOM for every node, checks that the page's script refreshes it in place, and
//! writes a screenshot to `target/tmp/status-page.png` for people to look at.
//!
//! Needs Chromium (`apt-get install chromium`); without it the test fails and says so.
//! `CHROMIUM=/path/to/browser` picks another binary.
#![cfg(feature = "scheduler")]

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/rest_fake.rs"]
mod fake;

use fake::{Connection, Fake};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::rest::{self, RestConfig, ServerOptions};
use storage_framework::scheduler::metrics::Metrics;
use storage_framework::scheduler::model::Phase;

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "headless Chromium is required for the status page test and none was found on PATH \
         (looked for chromium, chromium-browser, google-chrome). Install it with \
         `apt-get install chromium` (scripts/test.sh does), or set CHROMIUM=/path/to/browser."
    );
}

/// Runs Chromium headless with `args` and the URL; returns its stdout. Killed at a deadline.
fn run_chromium(profile: &Path, args: &[String], url: &str) -> String {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium().display()));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}): {err}");
    out
}

fn profile_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("chromium-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("profile dir");
    d
}

/// Text of the DOM with tags removed and whitespace collapsed, for "what a person reads".
fn visible_text(dom: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    let body = dom.split("<body").nth(1).unwrap_or(dom);
    let body = body.split("<script").next().unwrap_or(body);
    for c in body.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn status_page_renders_every_node_in_chromium() {
    // After the browser's first look, node 5 moves on and a sixth node appears: the page's
    // script must show both without a reload.
    let fake = Fake::scripted(
        fake::five_nodes(),
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
        Some((
            1,
            Box::new(|s| {
                for mut n in s.model.nodes.values_mut() {
                    if n.hostname == "storage-05.dc1.example" {
                        n.phase = Phase::Environment;
                        n.last_contact_ms = Some(
                            storage_framework::clock::Clock::now_ms(
                                &storage_framework::clock::SystemClock,
                            ) - 2_000,
                        );
                    }
                }
                let mut six = fake::node(
                    6,
                    "storage-06.dc1.example",
                    storage_framework::scheduler::model::Persona::Data,
                    Phase::Launching,
                );
                six.task = None;
                fake::add(s, six);
            }),
        )),
    );
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(PathBuf::from(
                    "/nonexistent/storage-executor",
                )),
            ),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            // Every read asks the fake dispatcher: tests read back at once what they changed.
            view_max_age: std::time::Duration::ZERO,
            ..ServerOptions::default()
        },
    )
    .expect("REST server");
    let url = format!("http://{}/ui", rest.local_addr());

    // Virtual time lets the page's 5 s refresh timer fire without waiting 5 s.
    let dom = run_chromium(
        &profile_dir("dom"),
        &["--virtual-time-budget=7000".into(), "--dump-dom".into()],
        &url,
    );
    assert!(dom.contains("<table"), "no table rendered: {dom}");
    let text = visible_text(&dom);
    for (host, persona, phase) in [
        ("storage-01.dc1.example", "primary", "running"),
        ("storage-02.dc1.example", "secondary", "storage-attach"),
        ("storage-03.dc1.example", "tiebreaker", "packages"),
        ("storage-04.dc1.example", "data", "failed"),
        ("storage-05.dc1.example", "data", "environment"),
        ("storage-06.dc1.example", "data", "launching"),
    ] {
        let at = text
            .find(host)
            .unwrap_or_else(|| panic!("{host} not on the page: {text}"));
        // The row reads host, agent, persona, phase, in that order.
        let row = &text[at..(at + 300).min(text.len())];
        let p = row
            .find(persona)
            .unwrap_or_else(|| panic!("{host}: no persona in {row}"));
        assert!(
            row[p..].contains(phase),
            "{host}: phase {phase} missing in {row}"
        );
    }
    assert!(text.contains("dpkg -i emc-scaleio-sds_2.0-12000.122_amd64.deb exited with status 1"));
    assert!(
        dom.contains("class=\"error\""),
        "the error is not styled as one"
    );
    assert!(
        text.contains("3f2a61e0-8c1b-4d2e-9a7f-5b6c7d8e9f00-0001"),
        "framework id"
    );
    assert!(text.contains("10.0.0.5:5050"), "master");
    assert!(text.contains("Subscribed"));
    assert!(text.contains("nodes 6"), "totals: {text}");
    assert!(
        text.contains("running 1") && text.contains("failed 1"),
        "totals: {text}"
    );
    assert!(text.contains("s ago"), "last contact as an age: {text}");
    assert!(
        text.contains("/dev/sdb") && text.contains("/dev/nvme0n1"),
        "devices"
    );
    assert!(
        text.contains("step 10 of 10"),
        "progress of the running node"
    );

    // A screenshot for people (the state after the refresh).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &profile_dir("shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,900".into(),
        ],
        &url,
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(png.len() > 10_000, "suspiciously small screenshot");
    eprintln!("status page screenshot: {}", shot.display());
    drop(rest);
}

/// A large cluster's page shows counts per phase and persona, failed nodes
/// first, then hosts in natural order (`node-2` before `node-11`), 100 rows a page with
/// links to the next, and a filter box; its size stays bounded.
#[test]
fn status_page_pages_filters_and_orders_naturally_in_chromium() {
    use storage_framework::scheduler::model::{Persisted, Persona};
    let mut state = Persisted::default();
    for i in 1..=250 {
        let persona = match i {
            1 => Persona::Primary,
            2 => Persona::Secondary,
            3 => Persona::Tiebreaker,
            _ => Persona::Data,
        };
        let phase = match i {
            77 => Phase::Failed,
            150 => Phase::Lost,
            _ => Phase::Running,
        };
        let mut n = fake::node(i, &format!("node-{i}"), persona, phase);
        if i == 77 {
            n.last_error = Some("packages: the SDS package did not install".into());
        }
        fake::add(&mut state, n);
    }
    let fake = Fake::start(
        state,
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(PathBuf::from(
                    "/nonexistent/storage-executor",
                )),
            ),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            // Every read asks the fake dispatcher: tests read back at once what they changed.
            view_max_age: std::time::Duration::ZERO,
            ..ServerOptions::default()
        },
    )
    .expect("REST server");
    let base = format!("http://{}/ui", rest.local_addr());
    let dom = |query: &str| {
        run_chromium(
            &profile_dir("paging"),
            &["--dump-dom".into()],
            &format!("{base}{query}"),
        )
    };
    let hosts = |dom: &str| -> Vec<String> {
        dom.split("<div class=\"host\">")
            .skip(1)
            .filter_map(|s| s.split('<').next())
            .map(str::to_owned)
            .collect()
    };

    let first = dom("");
    let shown = hosts(&first);
    assert_eq!(shown.len(), 100, "one page of 100 rows");
    assert_eq!(
        shown[..6],
        ["node-77", "node-150", "node-1", "node-2", "node-3", "node-4"],
        "failed, then lost, then natural order"
    );
    let pos = |h: &str| shown.iter().position(|s| s == h).unwrap();
    assert!(pos("node-9") < pos("node-10") && pos("node-10") < pos("node-11"));
    let text = visible_text(&first);
    for needle in [
        "nodes 250",
        "running 248",
        "failed 1",
        "lost 1",
        "primary 1",
        "secondary 1",
        "tiebreaker 1",
        "data 247",
        "Showing 1–100 of 250 nodes",
        "Next ›",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    assert!(
        first.contains("<input type=\"search\" name=\"q\""),
        "filter box"
    );
    assert!(
        first.contains("href=\"?offset=100\""),
        "link to the next page"
    );

    let second = hosts(&dom("?offset=100"));
    assert_eq!(second.len(), 100);
    assert_eq!(shown.last().map(String::as_str), Some("node-99"));
    assert_eq!(second[0], "node-100", "the page after node-99");
    let last = hosts(&dom("?offset=200"));
    assert_eq!(last.len(), 50);
    assert_eq!(last.last().map(String::as_str), Some("node-250"));

    let filtered = dom("?q=node-24");
    let text = visible_text(&filtered);
    assert_eq!(
        hosts(&filtered),
        [
            "node-24", "node-240", "node-241", "node-242", "node-243", "node-244", "node-245",
            "node-246", "node-247", "node-248", "node-249"
        ]
    );
    assert!(
        text.contains("Showing 1–11 of 11 matching nodes (250 in all)"),
        "{text}"
    );
    assert!(
        filtered.contains("value=\"node-24\""),
        "the box keeps the filter"
    );
    assert_eq!(hosts(&dom("?phase=failed")), ["node-77"]);
    assert_eq!(hosts(&dom("?persona=primary")), ["node-1"]);
    drop(rest);
}

/// An upgrade under way: the page's plan section (below the nodes) names it and shows the
/// node whose step waits, with why, as a browser renders it; that node's own row says so too.
#[test]
fn status_page_shows_the_plan_and_why_a_node_waits_in_chromium() {
    let fake = Fake::start(
        fake::upgrading(),
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    let rest = fake::serve(fake.inputs.clone());
    let url = format!("http://{}/ui", rest.local_addr());
    let dom = run_chromium(&profile_dir("plan"), &["--dump-dom".into()], &url);
    let start = dom
        .find("<section id=\"plan\">")
        .unwrap_or_else(|| panic!("no plan section: {dom}"));
    let end = start + dom[start..].find("</section>").expect("section ends");
    let plan = visible_text(&format!("<body>{}", &dom[start..end]));
    assert!(plan.contains("Plan: upgrade"), "{plan}");
    assert!(
        plan.contains("target generation 2, 5 nodes below it"),
        "{plan}"
    );
    assert!(
        plan.contains("waiting 1") && plan.contains("failed 2"),
        "{plan}"
    );
    let at = plan
        .find("storage-02.dc1.example")
        .unwrap_or_else(|| panic!("the waiting node is not in the plan: {plan}"));
    let row = &plan[at..];
    assert!(
        row.contains(&format!("1 → 2 upgrade-sds waiting {}", fake::WAITING)),
        "{row}"
    );
    assert!(
        plan.contains("rpm -Uvh <EMC-ScaleIO-mdm-2.5>.rpm exited with status 1"),
        "the failed reason, escaped and read back as text: {plan}"
    );
    assert!(
        !dom.contains("<emc-scaleio"),
        "unescaped markup reached the DOM"
    );
    // The node's own row in the table above.
    let text = visible_text(&dom[..start]);
    let at = text
        .find("storage-02.dc1.example")
        .expect("storage-02's row");
    assert!(
        text[at..].contains(&format!("upgrade-sds {}", fake::WAITING)),
        "{}",
        &text[at..(at + 400).min(text.len())]
    );
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page-plan.png");
    run_chromium(
        &profile_dir("plan-shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400".into(),
        ],
        &url,
    );
    eprintln!("status page with a plan: {}", shot.display());
    drop(rest);
}

/// The page of a real scheduler on the dev cluster: every node shows, and no secret (the
/// gateway password, any executor's secret from the state file) shows anywhere an operator
/// or a tool can look: the page, `/api/state`, `/metrics`, the log at debug.
#[test]
fn real_scheduler_page_shows_every_node_and_no_secret() {
    use devcluster::master;
    let dir = std::env::temp_dir().join(format!("page-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = master::start(master::MasterConfig {
        agents: 3,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster");
    let port = cluster::free_port();
    let log = dir.join("scheduler.log");
    let store = dir.join("state.json");
    let password = "Pa55-w0rd-never-shown";
    let mut child = Command::new(cluster::scheduler_bin())
        .args(cluster::scheduler_args(
            &m.addr().to_string(),
            port,
            &store,
            password,
        ))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("scheduler");
    let base = format!("http://127.0.0.1:{port}");
    let get = |path: &str| -> Option<String> {
        ureq::get(&format!("{base}{path}"))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = get("/api/state")
            .map(|s| s.matches("\"TASK_RUNNING\"").count())
            .unwrap_or(0);
        if running == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "3 running executors never showed in /api/state"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let url = format!("{base}/ui");
    let dom = run_chromium(&profile_dir("real"), &["--dump-dom".into()], &url);
    let text = visible_text(&dom);
    for a in m.agents().expect("agents") {
        assert!(
            text.contains(a.hostname.as_str()),
            "{} not on the page: {text}",
            a.hostname
        );
    }
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page-devcluster.png");
    run_chromium(
        &profile_dir("real-shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,700".into(),
        ],
        &url,
    );
    assert!(std::fs::read(&shot)
        .expect("screenshot")
        .starts_with(b"\x89PNG"));

    // Every executor secret the scheduler handed out, as the dev master passed them on.
    let mut secrets: Vec<String> = cluster::launched_secrets(&m).into_values().collect();
    assert_eq!(secrets.len(), 3);
    secrets.push(password.to_owned());
    let state = get("/api/state").unwrap_or_default();
    let metrics = get("/metrics").unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    let shown = [
        ("/ui", dom),
        ("/api/state", state),
        ("/metrics", metrics),
        ("log", std::fs::read_to_string(&log).unwrap_or_default()),
    ];
    for (where_, body) in &shown {
        assert!(!body.is_empty(), "{where_} is empty");
        for s in &secrets {
            assert!(!body.contains(s.as_str()), "a secret shows in {where_}");
        }
    }
    drop(m);
}
