//! SIGTERM and SIGINT become `Input::Shutdown`; a second one exits at once.

use crate::scheduler::exchange::Input;
use crate::scheduler::exit::{EXIT_FAILURE, EXIT_OK};
use crossbeam_channel::Sender;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

pub fn forward(to: Sender<Input>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut seen = false;
            for sig in signals.forever() {
                if seen {
                    log::warn!("second signal {sig}: exiting now");
                    std::process::exit(EXIT_FAILURE);
                }
                seen = true;
                log::info!("signal {sig}: stopping");
                if to.send(Input::Shutdown).is_err() {
                    std::process::exit(EXIT_OK);
                }
            }
        })?;
    Ok(())
}
