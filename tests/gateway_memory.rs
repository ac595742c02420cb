//! What a listing costs the scheduler's heap: the gateway worker reads every SDS, device and
//! SDC of the storage cluster in each health poll (every 30 s by default), so at 10,000 nodes
//! a listing is megabytes of JSON. It must be typed as it arrives. Read whole and parsed into
//! a JSON tree first, one listing of 10,000 SDCs held about 30 MB more than its typed items,
//! and one of 10,000 SDSs about 54 MB, in a scheduler the launcher gives 32 MB.
//!
//! The heap is counted per thread: the dev gateway serves from its own threads in this
//! process, and the client does all of its work on the calling one.

use devcluster::gateway::{self, GatewayConfig as SimConfig, MdmIps};
use std::cell::Cell;
use std::time::Duration;
use storage_framework::gateway::api;
use storage_framework::gateway::client::{GatewayClient, GatewayConfig};
use storage_framework::secret::Secret;

#[path = "support/heap_count.rs"]
mod heap_count;

use heap_count::{mark, HELD, PEAK};

const SDCS: usize = 10_000;

#[test]
fn a_listing_of_ten_thousand_sdcs_is_typed_as_it_arrives() {
    let primary = "10.0.0.11";
    let mdm = MdmIps {
        primary: primary.into(),
        secondary: "10.0.0.12".into(),
        tiebreaker: "10.0.0.13".into(),
    };
    let gw = gateway::start(SimConfig::new("Gw-Pa55word!", mdm)).expect("dev gateway");
    for i in 0..SDCS {
        let ip = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        gw.sdc_installed(&ip, primary).expect("an SDC registered");
    }
    let mut config = GatewayConfig::new(&gw.addr().to_string(), Secret::new("Gw-Pa55word!"), "2.0");
    config.request_timeout = Duration::from_secs(60);
    let mut client = GatewayClient::new(config).expect("client");
    // A first call logs in and sets up the connection, so that the one measured is a poll's.
    api::systems(&mut client).expect("systems");

    let before = mark();
    let sdcs = api::sdcs(&mut client).expect("the SDCs");
    let kept = HELD.with(Cell::get) - before;
    let peak = PEAK.with(Cell::get) - before;
    assert_eq!(sdcs.len(), SDCS);
    assert!(
        kept > 0,
        "the typed SDCs hold heap ({kept} bytes counted on this thread)"
    );
    // The typed items, the list's growth by doubling (its old and new buffers at once), and
    // one item's text and the transport's buffers: never the listing's text or a tree of it.
    let bound = 2 * kept + 1024 * 1024;
    assert!(
        peak <= bound,
        "listing {SDCS} SDCs peaked at {} KB of heap on the calling thread, for {} KB of \
         typed SDCs kept (bound {} KB): the listing was held whole",
        peak / 1024,
        kept / 1024,
        bound / 1024
    );
    drop(sdcs);
    gw.shutdown();
}
