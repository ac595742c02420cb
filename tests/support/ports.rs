// Included (`include!`) by the support modules that start servers on ports they choose.

/// A free port in `low..low + span`, below Linux's ephemeral range (32768-60999). A port the
/// kernel handed out for `:0` goes back to that range when the probe closes, where a client
/// connection's source port can take it before the server binds it: a scheduler then exited
/// "Address already in use" and a clean-clone run failed. `next` numbers the calls of one
/// includer in this process; the base differs between test processes.
fn port_below_ephemeral(low: u32, span: u32, next: &std::sync::atomic::AtomicU32) -> u16 {
    let base = std::process::id().wrapping_mul(37) % span;
    for _ in 0..span {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = (low + (base + n) % span) as u16;
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{}", low + span);
}
