//! A fetched executor can be run at once, even when another thread forked while the fetch
//! was writing it (the ETXTBSY race of the dev cluster's fetchers).

use devcluster::fetched;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::thread;

/// Yields a small script; on its first read it forks a child that stays between fork and
/// exec (holding a copy of every descriptor this process has open at that moment) until it
/// gets a byte on `control`. The spawn runs on a thread of its own, since `spawn` returns
/// only once the child has exec'd.
struct ForkingReader {
    body: io::Cursor<Vec<u8>>,
    control: UnixStream,
    child_end: UnixStream,
    held: Option<thread::JoinHandle<io::Result<Child>>>,
}

impl Read for ForkingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.held.is_none() {
            let fd = self.child_end.as_raw_fd();
            let mut cmd = Command::new("true");
            // SAFETY: the hook only calls write(2) and read(2) on an inherited descriptor,
            // which are async-signal-safe; the File is never dropped, so nothing is closed.
            unsafe {
                cmd.pre_exec(move || {
                    let file = std::mem::ManuallyDrop::new(std::fs::File::from_raw_fd(fd));
                    (&*file).write_all(b"f")?;
                    let mut byte = [0u8; 1];
                    let _ = (&*file).read(&mut byte);
                    Ok(())
                });
            }
            self.held = Some(thread::spawn(move || cmd.spawn()));
            let mut forked = [0u8; 1];
            (&self.control).read_exact(&mut forked)?;
        }
        self.body.read(buf)
    }
}

#[test]
fn a_file_fetched_while_another_thread_forked_runs_at_once() {
    let dir = std::env::temp_dir().join(format!("fetched-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join("executor");
    let (control, child_end) = UnixStream::pair().unwrap();
    let mut reader = ForkingReader {
        body: io::Cursor::new(b"#!/bin/sh\nexit 7\n".to_vec()),
        control,
        child_end,
        held: None,
    };

    fetched::write_from(&mut reader, &dest).expect("fetch");
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The forked child still holds whatever this process had open while writing.
    let run = Command::new(&dest).status();

    (&reader.control).write_all(b"x").unwrap();
    let mut held = reader
        .held
        .take()
        .expect("the reader forked")
        .join()
        .unwrap()
        .unwrap();
    let held = held.wait().unwrap();
    assert!(held.success(), "the held child ran `true`: {held}");
    let status = run.expect("the fetched file runs (no 'Text file busy')");
    assert_eq!(status.code(), Some(7), "the fetched script ran: {status}");
    assert!(
        !dir.join(".executor.fetching").exists(),
        "the staging file is removed"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
