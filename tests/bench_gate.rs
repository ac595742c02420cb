//! `scripts/bench.sh` as a gate: run against a stand-in `cargo` that prints chosen figures, it
//! takes the median of repeated parts, shows a crashed part's output, holds every figure to
//! `tests/bench/targets.txt`, and exits non-zero on a miss, a missing figure or a crash.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A copy of what bench.sh reads, with release artifacts of chosen sizes and no real build.
fn tree(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bench-gate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for sub in ["scripts", "tests/bench", "dist/last-build", "bin"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let root = Path::new(ROOT);
    std::fs::copy(root.join("scripts/bench.sh"), d.join("scripts/bench.sh")).unwrap();
    write(&d.join("scripts/build-release.sh"), "#!/bin/sh\n");
    // The upb stand-in: Google's upb at a million events a second.
    write(
        &d.join("tests/bench/upb.sh"),
        "#!/bin/sh\necho 'bench wire_decode_upb 1000000 events/s'\n",
    );
    write(&d.join("Cargo.toml"), "name = \"store\"\n");
    std::fs::write(
        d.join("dist/last-build/storage-scheduler"),
        vec![0u8; 4_000_000],
    )
    .unwrap();
    std::fs::write(
        d.join("dist/last-build/storage-executor"),
        vec![0u8; 2_000_000],
    )
    .unwrap();
    d
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(path).status();
}

/// Runs bench.sh with `cargo` answering each `--bench NAME` from `figures` (a shell `case`
/// body); returns the exit code and stdout.
fn run(dir: &Path, targets: &str, figures: &str) -> (i32, String) {
    std::fs::write(dir.join("tests/bench/targets.txt"), targets).unwrap();
    // Each bench counts its runs, so a repeated part can print a different figure per run.
    let cargo = format!(
        "#!/bin/bash\nfor a; do b=$a; done\nn=$(cat \"$0.$b\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.$b\"\ncase \"$b\" in\n{figures}\n*) ;;\nesac\n"
    );
    write(&dir.join("bin/cargo"), &cargo);
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(dir.join("scripts/bench.sh"))
        .env("PATH", path)
        .output()
        .expect("bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const TARGETS: &str = "# name target goal unit direction\n\
    wire_decode_protobuf 1000000 - events/s min\n\
    node_install_seconds 1 0.5 s max\n\
    release_size_scheduler_bytes 4718592 4194304 bytes max\n";

/// The benches that print one chosen figure each (a shell `case` body for `run`).
const WIRE_AND_NODE: &str = "wire) echo 'bench wire_decode_protobuf 1200000 events/s';;\n\
    node) echo 'bench node_install_seconds 0.3 s';;";

/// Asserts that a run (`run`'s answer) exited with `code` and printed each of `lines`.
fn expect((got, out): (i32, String), code: i32, lines: &[&str]) {
    assert_eq!(got, code, "{out}");
    for line in lines {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
}

#[test]
fn figures_within_their_targets_pass_and_repeated_parts_give_the_median() {
    let d = tree("pass");
    expect(
        run(
            &d,
            TARGETS,
            // node runs three times: 0.9, 0.2, 0.4 -> median 0.4, spread 0.2-0.9.
            "wire) echo 'bench wire_decode_protobuf 1200000 events/s';;\n\
             node) case $n in 1) v=0.9;; 2) v=0.2;; *) v=0.4;; esac; echo \"bench node_install_seconds $v s\";;",
        ),
        0,
        &[
            "bench node_install_seconds 0.4 s\n",
            "bench node_install_seconds_runs 0.2-0.9 s\n",
            "bench_check node_install_seconds 0.4 ok target 1 goal 0.5",
            "bench_check release_size_scheduler_bytes 4000000 ok",
        ],
    );

    // A figure with a goal and no target (`-`) is shown beside its goal and holds nothing:
    // the decode over upb's, 1.2 against a goal of 5.
    let targets = format!("{TARGETS}wire_decode_protobuf_upb_x - 5 x min\n");
    expect(
        run(&d, &targets, WIRE_AND_NODE),
        0,
        &["bench_check wire_decode_protobuf_upb_x 1.20 goal-only goal 5"],
    );
}

#[test]
fn a_missed_target_a_missing_figure_and_a_crash_each_fail_the_run() {
    let d = tree("fail");
    expect(
        run(
            &d,
            TARGETS,
            "wire) echo 'bench wire_decode_protobuf 292000 events/s';;\n\
             node) echo 'bench node_install_seconds 0.3 s';;",
        ),
        1,
        &["bench_check wire_decode_protobuf 292000 MISSED target 1000000"],
    );

    let targets = format!("{TARGETS}converge_seconds_100 5 3 s max\n");
    expect(
        run(&d, &targets, WIRE_AND_NODE),
        1,
        &["bench_check converge_seconds_100 missing"],
    );

    let crash =
        format!("{WIRE_AND_NODE}\ngateway) echo 'only 3 of 100 nodes attached' >&2; exit 101;;");
    expect(
        run(&d, TARGETS, &crash),
        1,
        &[
            "# part gateway crashed",
            "#   only 3 of 100 nodes attached",
            "bench_check crashed: gateway",
        ],
    );
}
