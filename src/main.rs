//! `storage-scheduler`: configured by flags only (`-name=value`); see `-help`. Its first
//! argument `ctl` makes it the operators' client instead (`storage-scheduler ctl -help`).

use storage_framework::scheduler::{self, flags};
use storage_framework::secret::mask_uri_credentials;
use storage_framework::{logging, rest};

storage_framework::scheduler_heap!();

fn main() {
    let hardening = storage_framework::secret::no_core_dumps();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |name: &str| std::env::var(name).ok();
    if args.first().is_some_and(|a| a == "ctl") {
        std::process::exit(storage_framework::cli::main(&args[1..], &env));
    }
    let config = match flags::parse(&args, &env) {
        Ok(flags::Parsed::Run(config)) => config,
        Ok(flags::Parsed::Help(text)) | Ok(flags::Parsed::Version(text)) => {
            println!("{text}");
            return;
        }
        Err(problems) => {
            for p in problems {
                eprintln!("storage-scheduler: {}", mask_uri_credentials(&p));
            }
            eprintln!("storage-scheduler: see -help");
            std::process::exit(2);
        }
    };
    let rust_log = env("RUST_LOG");
    env_logger::Builder::new()
        .parse_filters(&logging::filter_spec(config.loglevel, rust_log.as_deref()))
        .format(|buf, record| {
            // env_logger's own layout, with our timestamp.
            use std::io::Write;
            let at = logging::utc_millis(std::time::SystemTime::now());
            let (level, target) = (record.level(), record.target());
            let message = record.args().to_string();
            let message = mask_uri_credentials(&message).replace('\n', "\n    ");
            writeln!(buf, "[{at} {level:<5} {target}] {message}")
        })
        .init();
    if let Err(e) = hardening {
        log::warn!("core dumps of the scheduler stay possible: {e}");
    }
    let listen = config.rest_listen;
    let start_rest: scheduler::exchange::StartRest =
        Box::new(move |c| rest::start(c, listen).map(|h| Box::new(h) as Box<dyn std::any::Any>));
    std::process::exit(scheduler::run(*config, start_rest));
}
