//! `storage-executor`: the Mesos executor the storage scheduler launches on every agent.
//!
//! Exit codes: 0 after an orderly SHUTDOWN, 1 when the agent is gone or sent ERROR,
//! 2 when the environment the agent should have provided is missing or invalid.

mod agent;
mod env;
mod host;
mod logging;
mod node;
mod payload;
mod updates;
mod uuid;

use std::process::ExitCode;
// The digests of downloads: shared with the scheduler, which names the executor binary's.
use storage_framework::sha256;

const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let hardening = no_core_dumps();
    // Agents start the executor without arguments; `-version` is for operators checking a
    // release artifact.
    if std::env::args()
        .skip(1)
        .any(|a| storage_framework::version::is_version_flag(&a))
    {
        println!("{}", storage_framework::version::line("storage-executor"));
        return ExitCode::SUCCESS;
    }
    let config = match env::Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("storage-executor: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let client = match agent::client(&config) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("storage-executor: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    logging::init(&config.log_filter, &config.executor_id);
    if let Err(e) = hardening {
        log::warn!("core dumps of the executor stay possible: {e}");
    }
    let code = agent::run(config, client);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// No core dump of this process, and no other process of its user may read its memory: a
/// dump would hold the executor's secret and the passwords of its plan. The limit is
/// inherited by the commands it runs.
fn no_core_dumps() -> Result<(), String> {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit and prctl on this process, with a valid rlimit and plain integers.
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) } != 0 {
        return Err(format!(
            "setrlimit(RLIMIT_CORE, 0): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: as above.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(format!(
            "prctl(PR_SET_DUMPABLE, 0): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Run in the test process itself, which then cannot dump core either.
    #[test]
    fn no_core_file_and_not_dumpable() {
        super::no_core_dumps().expect("hardening");
        let mut limit = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        // SAFETY: getrlimit and prctl on this process, with a valid rlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) }, 0);
        assert_eq!((limit.rlim_cur, limit.rlim_max), (0, 0));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }, 0);
    }
}
