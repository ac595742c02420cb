//! The open-file limit. Every connection is a file, and 10,000 executors' long polls alone
//! pass the usual soft limit of 1,024, after which `accept` fails for everyone: the soft
//! limit is raised to the hard one at start, and the server's bounds on held connections
//! (long polls, connections being closed) are sized from what the limit allows.

use super::ServerOptions;

/// Files the scheduler holds besides REST connections: the store, the master's and the
/// gateway's connections, the log, the executor binary being read, and some slack.
const OTHER_FILES: u64 = 256;
/// Long polls at most, whatever the limit: beyond, their memory matters more than files.
const MAX_LONG_POLLS: u64 = 50_000;
const MIN_LONG_POLLS: u64 = 16;
/// Connections held by the closer at most.
const MAX_CLOSING: u64 = 4096;
const MIN_CLOSING: u64 = 64;
/// Linux's own ceiling (`fs.nr_open`) by default: an unlimited hard limit is raised to this.
const CEILING: u64 = 1 << 20;

/// Raises the soft open-file limit to the hard one; the limit before and after.
pub fn raise() -> Result<(u64, u64), String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one struct passed, which lives across
    // the calls.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        ));
    }
    let before = lim.rlim_cur;
    let target = lim.rlim_max.min(CEILING);
    if before >= target {
        return Ok((before, before));
    }
    lim.rlim_cur = target;
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(format!(
            "cannot raise the open-file limit from {before} to {target}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((before, target))
}

/// The bounds on held connections for an open-file limit of `files`: half of what the
/// workers, the queue and the other files leave goes to long polls, a quarter to
/// connections being closed, the rest to connections waiting for their address's turn.
pub fn size(mut options: ServerOptions, files: u64) -> ServerOptions {
    let busy = OTHER_FILES + options.workers as u64 + options.queue as u64;
    let spare = files.saturating_sub(busy);
    options.max_long_polls = (spare / 2).clamp(MIN_LONG_POLLS, MAX_LONG_POLLS) as usize;
    options.closing = (spare / 4).clamp(MIN_CLOSING, MAX_CLOSING) as usize;
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_limit() {
        let sized = |files| {
            let o = size(ServerOptions::default(), files);
            (o.max_long_polls, o.closing)
        };
        // The usual soft limit: the workers and queue take most of it.
        assert_eq!(sized(1024), (16, 64));
        // A common hard limit: 65,536 - 256 - 64 - 1,024 = 64,192 to share.
        assert_eq!(sized(65_536), (32_096, 4096));
        assert_eq!(sized(1 << 20), (50_000, 4096));
        assert_eq!(sized(20_000), (9_328, 4096));
        assert_eq!(sized(0), (16, 64));
    }

    #[test]
    fn the_limit_is_raised_to_the_hard_one() {
        let (before, after) = raise().unwrap();
        assert!(after >= before);
        // A second call finds it raised already.
        assert_eq!(raise().unwrap(), (after, after));
    }
}
