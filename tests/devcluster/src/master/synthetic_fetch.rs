//! The fetcher of synthetic agents (`MasterConfig::synthetic_fetchers`): before an emulated
//! executor starts, its CommandInfo URIs are downloaded over HTTP as a Mesos agent's fetcher
//! would, the bytes counted and thrown away (10,000 sandboxes of a 2 MB binary would be
//! 20 GB of disk). A failed fetch fails the launch as on a real agent (`LaunchFailed`).
//!
//! 10,000 synthetic agents share one machine, so their fetches share a fixed pool of threads:
//! the pool's size is how many downloads are in flight at once. Runs off the owner thread,
//! which must never wait on the network; every outcome comes back as a `Cmd`.

use super::state::{Cmd, ProcessEvent};
use crossbeam_channel::{Receiver, Sender};
use std::io::{self, Read};
use std::time::Duration;
use storage_framework::mesos::types::command_info;

pub(super) struct Job {
    pub agent: usize,
    pub run: u64,
    pub uris: Vec<command_info::Uri>,
}

/// The pool: dropping it (with the cluster) ends its threads once their jobs are done.
pub(super) struct Fetcher {
    jobs: Sender<Job>,
}

impl Fetcher {
    pub fn start(threads: usize, results: Sender<Cmd>) -> Fetcher {
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        for i in 0..threads.max(1) {
            let (rx, results) = (rx.clone(), results.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("synthetic-fetch-{i}"))
                .spawn(move || work(&rx, &results));
            if let Err(e) = spawned {
                log::warn!("synthetic fetcher thread {i}: {e}");
            }
        }
        Fetcher { jobs }
    }

    pub fn fetch(&self, job: Job) -> Result<(), Job> {
        self.jobs.send(job).map_err(|e| e.into_inner())
    }
}

fn work(jobs: &Receiver<Job>, results: &Sender<Cmd>) {
    let http = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build(),
    );
    while let Ok(job) = jobs.recv() {
        let (agent, run) = (job.agent, job.run);
        let mut bytes = 0;
        let mut error = None;
        for uri in &job.uris {
            match download(&http, uri.value.as_str(), gunzipped(uri)) {
                Ok(n) => bytes += n,
                Err(e) => {
                    error = Some(format!("Failed to fetch '{}': {e}", uri.value));
                    break;
                }
            }
        }
        let event = match error {
            None => ProcessEvent::Fetched { agent, run, bytes },
            Some(error) => ProcessEvent::LaunchFailed { agent, run, error },
        };
        if results.send(Cmd::Process(event)).is_err() {
            return;
        }
    }
}

/// Whether a real agent's fetcher would put the download through `gunzip` (a bare `.gz` to
/// extract, `process.rs`): then a body that is not gzip fails the launch, as it fails there.
fn gunzipped(uri: &command_info::Uri) -> bool {
    let path = uri.value.split(['?', '#']).next().unwrap_or("");
    let name = uri.output_file.as_deref().unwrap_or(path);
    uri.executable != Some(true)
        && uri.extract != Some(false)
        && name.ends_with(".gz")
        && ![".tar.gz", ".tgz"].iter().any(|t| name.ends_with(t))
}

/// One URI's body, counted: only http (what a loopback scheduler serves). Gzip is only
/// recognised (its magic bytes), not unpacked: 10,000 agents' worth would be the bench
/// machine's CPU, not the scheduler's.
fn download(http: &ureq::Agent, url: &str, gzip: bool) -> Result<u64, String> {
    if !url.starts_with("http://") {
        return Err("synthetic agents fetch http URIs only".into());
    }
    let response = http.get(url).call().map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    let announced = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let mut body = response.into_body().into_reader();
    let mut magic = [0u8; 2];
    let mut head = 0;
    while head < magic.len() {
        match body.read(&mut magic[head..]) {
            Ok(0) => break,
            Ok(n) => head += n,
            Err(e) => return Err(format!("download failed: {e}")),
        }
    }
    if gzip && (head < 2 || magic != [0x1f, 0x8b]) {
        return Err("Failed to extract: gunzip: not in gzip format".into());
    }
    let n = head as u64
        + io::copy(&mut (&mut body).take(u64::MAX), &mut io::sink())
            .map_err(|e| format!("download failed: {e}"))?;
    match announced {
        Some(len) if len != n => Err(format!("{n} bytes of an announced {len}")),
        _ => Ok(n),
    }
}
