//! Where the dev cluster's fetchers (agents' and the launcher's) put a fetched file.
//!
//! A file this multi-threaded process writes can fail to execute with ETXTBSY ("Text file
//! busy"): a thread that forks while the write descriptor is open hands a copy of it to its
//! child, which holds it until its own exec. An executor launched right after its fetch then
//! failed now and then under load. The Mesos fetcher is a process of its own, so a real agent
//! never sees this; the same holds here when a child process (`cp`) writes the final file and
//! this process writes only a staging file nobody executes.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Writes what `reader` yields to `dest`, through a staging file beside it.
pub fn write_from(reader: &mut dyn Read, dest: &Path) -> Result<(), String> {
    let staging = staging_path(dest);
    let result = File::create(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))
        .and_then(|mut file| {
            io::copy(reader, &mut file).map_err(|e| format!("download interrupted: {e}"))
        })
        .and_then(|_| copy_from(&staging, dest));
    let _ = fs::remove_file(&staging);
    result
}

/// Copies `source` to `dest` in a child process, so that no descriptor of ours ever writes it.
pub fn copy_from(source: &Path, dest: &Path) -> Result<(), String> {
    let out = Command::new("cp")
        .arg("--")
        .arg(source)
        .arg(dest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cp for {}: {e}", dest.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot copy {} to {} ({}): {}",
            source.display(),
            dest.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn staging_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.fetching"))
}
