//! Shared by the benches that link the library in-process.

/// Says what was measured: this bench binary, with the library linked in (bench.sh builds
/// it for the shipped musl target).
pub fn print_in_process_binary() {
    println!(
        "bench_binary {} ({}, library in-process)",
        std::env::current_exe().map_or_else(|_| "?".into(), |p| p.display().to_string()),
        if cfg!(target_env = "musl") {
            "static musl"
        } else {
            "glibc"
        }
    );
}
