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
    let hardening = storage_framework::secret::no_core_dumps();
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
