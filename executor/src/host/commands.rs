//! Commands run through `PATH` (never by absolute path, so the dev cluster's stand-ins are
//! found first), judged by their exit status. Output is kept only as a tail for error
//! messages: success is never read from it.
//!
//! Every host command of the executor goes through a [`Runner`]: [`HostRunner`] on the host,
//! a script in unit tests, so that what is decided from exit statuses can be tested without
//! the host's tools.
//!
//! Secrets go to the one child that needs them through its environment ([`Cmd::secret_env`]);
//! the argv and the names of variables are all that ever appear in a [`CommandError`].
//!
//! Every command has a deadline fitting its kind (`Cmd`'s `deadline`): past it, the command's
//! process group (the command and what it started) is killed and the error names the command
//! and the deadline, so a tool stuck on a lock or a dead MDM fails its phase instead of
//! holding the node worker. A command returns once it exits, even when a daemon it started
//! still holds its stdout or stderr. A run still not back a grace after its deadline is
//! given up (`bounded`): the node worker never waits on a command without end.

use std::fmt;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Bytes of combined output kept for an error message.
pub const TAIL_BYTES: usize = 2048;

/// One command line to run.
#[derive(Clone)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
    /// Variables shown in errors by name and value.
    pub env: Vec<(String, String)>,
    /// Variables whose values are secret: errors name them, never show the value.
    pub secret_env: Vec<(String, String)>,
    /// Lines written to the child's standard input (passwords a tool reads there), never
    /// shown: errors say only how many lines went in.
    pub secret_stdin: Vec<String>,
    /// How long it may run before its process group is killed: one of the kinds' deadlines
    /// below, [`Cmd::QUERY_DEADLINE`] unless its builder says otherwise.
    pub deadline: Duration,
}

impl Default for Cmd {
    fn default() -> Cmd {
        Cmd {
            program: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            secret_env: Vec::new(),
            secret_stdin: Vec::new(),
            deadline: Cmd::QUERY_DEADLINE,
        }
    }
}

impl Cmd {
    /// Reads of local state (the package database, a service's state, enabling one at
    /// boot, `systemctl daemon-reload`, asking init to reboot) answer in well under a second:
    /// half a minute covers a loaded host, and longer means a stuck lock or a broken tool.
    pub const QUERY_DEADLINE: Duration = Duration::from_secs(30);
    /// `scli` asks the MDM over the network, and a cluster change (a standby added, the mode
    /// switched) takes the MDM some seconds: a minute without an answer is an MDM that is
    /// down or unreachable.
    pub const SCLI_DEADLINE: Duration = Duration::from_secs(60);
    /// Starting or restarting a service waits for its daemon to come up: the gateway's
    /// Tomcat takes most of a minute, and systemd's own start timeout is 90 s.
    pub const SERVICE_DEADLINE: Duration = Duration::from_secs(120);
    /// Package installs download from repositories and run maintainer scripts that build
    /// and load kernel modules and start services: minutes are normal, ten are not.
    pub const INSTALL_DEADLINE: Duration = Duration::from_secs(600);

    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Cmd::default()
        }
    }

    pub fn deadline(mut self, deadline: Duration) -> Cmd {
        self.deadline = deadline;
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Cmd {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn secret_env(mut self, name: &str, value: &str) -> Cmd {
        self.secret_env.push((name.into(), value.into()));
        self
    }

    pub fn secret_stdin(mut self, line: &str) -> Cmd {
        self.secret_stdin.push(line.into());
        self
    }

    /// The command as a log-safe line: `MDM_IP=a,b TOKEN=<secret> dpkg -i file`.
    pub fn display(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|(n, v)| format!("{n}={v}")).collect();
        parts.extend(self.secret_env.iter().map(|(n, _)| format!("{n}=<secret>")));
        parts.push(self.program.clone());
        parts.extend(self.args.iter().cloned());
        if !self.secret_stdin.is_empty() {
            parts.push(format!("< <{} secret line(s)>", self.secret_stdin.len()));
        }
        parts.join(" ")
    }
}

impl fmt::Debug for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// What a finished command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub status: i32,
    pub stdout: String,
    /// Last [`TAIL_BYTES`] of stdout and stderr, stderr last.
    pub tail: String,
}

/// A command that could not run or did not exit 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    /// The log-safe command line.
    pub command: String,
    /// `None` when it never ran or was killed by a signal.
    pub status: Option<i32>,
    pub tail: String,
    /// Set when it was killed, with its process group, for running past this deadline.
    pub deadline: Option<Duration>,
}

impl CommandError {
    /// `cmd` ran and exited with `status`, leaving `tail`.
    pub fn exited(cmd: &Cmd, status: i32, tail: String) -> CommandError {
        CommandError {
            command: cmd.display(),
            status: Some(status),
            tail,
            deadline: None,
        }
    }

    /// `cmd` did not start or did not exit: `why`.
    pub fn unfinished(cmd: &Cmd, why: String) -> CommandError {
        CommandError {
            command: cmd.display(),
            status: None,
            tail: why,
            deadline: None,
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.status, self.deadline) {
            (Some(s), _) => write!(f, "`{}` exited with status {s}", self.command)?,
            (None, Some(d)) => {
                // The tail already says how the group was killed and what the command wrote.
                return write!(
                    f,
                    "`{}` ran past its deadline of {d:?}; {}",
                    self.command, self.tail
                );
            }
            (None, None) => write!(f, "`{}` did not finish", self.command)?,
        }
        if !self.tail.trim().is_empty() {
            write!(f, "; output ends: {}", self.tail.trim())?;
        }
        Ok(())
    }
}

/// Runs commands to completion.
pub trait Runner {
    /// Runs `cmd`. `Ok` whatever the exit status: callers that need success use
    /// [`Runner::check`].
    fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError>;

    /// Runs `cmd` and fails unless it exits 0.
    fn check(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
        let out = self.run(cmd)?;
        if out.status != 0 {
            return Err(CommandError::exited(cmd, out.status, out.tail));
        }
        Ok(out)
    }
}

/// Commands on this host, with no stdin unless the command has `secret_stdin`. Runs given
/// up on ([`bounded`]) are remembered until they end: the host checks of a running node
/// run every plan wait, and a command that sticks each time would otherwise leave a thread
/// (and maybe a child) behind each time.
#[derive(Default)]
pub struct HostRunner {
    /// The result channel of each run given up on: empty while the run is stuck, ready or
    /// hung up once it ended.
    abandoned: Vec<Ran>,
}

/// Where a run sends its result, once.
type Ran = mpsc::Receiver<Result<Output, CommandError>>;

/// Runs given up on and still stuck past which no new command starts: the host, or this
/// executor, is in a state that more commands would only pile onto.
const MAX_ABANDONED: usize = 4;

impl Runner for HostRunner {
    fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
        self.abandoned
            .retain(|ran| matches!(ran.try_recv(), Err(mpsc::TryRecvError::Empty)));
        if self.abandoned.len() >= MAX_ABANDONED {
            let why = format!(
                "not started: {} earlier commands given up past their deadlines are still stuck",
                self.abandoned.len()
            );
            return Err(CommandError::unfinished(cmd, why));
        }
        bounded(cmd, KILL_GRACE + OVERRUN_GRACE, spawn, &mut self.abandoned)
    }
}

/// How long after a command's deadline and [`KILL_GRACE`] the node worker still waits for
/// its run to return. Past its deadline a run kills the command's group and returns within
/// `KILL_GRACE`; one that has not by then is stuck where no deadline reaches (a run in CI
/// never came back from starting a 30 s `rpm -q`, and its node sat in `environment` for
/// minutes, reporting nothing).
const OVERRUN_GRACE: Duration = Duration::from_secs(15);

/// `run(cmd)` on a thread of its own, waited for until `cmd`'s deadline and `grace`: past
/// that, an error naming the command, and the thread is left to whatever holds it, its
/// result channel kept in `abandoned`. A node worker that fails its phase is relaunched;
/// one that waits forever is a node nobody hears from again.
fn bounded(
    cmd: &Cmd,
    grace: Duration,
    run: fn(&Cmd) -> Result<Output, CommandError>,
    abandoned: &mut Vec<Ran>,
) -> Result<Output, CommandError> {
    let (tx, rx) = mpsc::channel();
    let owned = cmd.clone();
    std::thread::Builder::new()
        .name("host-command".into())
        .spawn(move || {
            let _ = tx.send(run(&owned));
        })
        .map_err(|e| CommandError::unfinished(cmd, format!("cannot start a thread for it: {e}")))?;
    let limit = cmd.deadline + grace;
    let why = match rx.recv_timeout(limit) {
        Ok(result) => return result,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            "its run ended without a result (its thread panicked)".to_string()
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            abandoned.push(rx);
            format!(
                "its run did not return within {limit:?} (its deadline and {grace:?}): stuck \
                 where the deadline could not end it, and left behind"
            )
        }
    };
    log::error!("`{}`: {why}", cmd.display());
    Err(CommandError {
        deadline: Some(cmd.deadline),
        ..CommandError::unfinished(cmd, why)
    })
}

/// How long output may still come once the command exited: what it wrote just before is
/// read, while a daemon it started, holding the pipes open, is not waited for.
const READ_GRACE: Duration = Duration::from_millis(200);
/// How long a command killed at its deadline has to be reaped.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// What the threads watching a running command report.
enum Event {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// One of the two pipes reached its end.
    Closed,
    Exited(std::io::Result<std::process::ExitStatus>),
}

/// The output read, and the exit status once the command exited.
#[derive(Default)]
struct Gathered {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: Option<std::io::Result<std::process::ExitStatus>>,
}

impl Gathered {
    fn tail(&self) -> String {
        let mut both = String::from_utf8_lossy(&self.stdout).into_owned();
        both.push_str(&String::from_utf8_lossy(&self.stderr));
        tail(&both)
    }
}

fn spawn(cmd: &Cmd) -> Result<Output, CommandError> {
    let mut command = Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .stdin(if cmd.secret_stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a deadline kills whatever it started with it.
        .process_group(0);
    for (n, v) in cmd.env.iter().chain(&cmd.secret_env) {
        command.env(n, v);
    }
    let fail = |why: String| CommandError::unfinished(cmd, why);
    let deadline = Instant::now() + cmd.deadline;
    let mut child = command
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", cmd.program)))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        // A few short lines fit the pipe's buffer: this write cannot block on the child. A
        // child that exits without reading them is judged by its status, like any other.
        let text: String = cmd.secret_stdin.iter().map(|l| format!("{l}\n")).collect();
        let _ = stdin.write_all(text.as_bytes());
    }
    let pgid = child.id();
    let (tx, rx) = mpsc::channel();
    // Each pipe is read on its own thread, so that neither can fill and block the child and
    // a pipe that a daemon keeps open cannot keep this call waiting.
    read_pipe(child.stdout.take(), Event::Stdout, tx.clone());
    read_pipe(child.stderr.take(), Event::Stderr, tx.clone());
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exited(child.wait()));
    });
    let mut got = Gathered::default();
    gather(&rx, &mut got, deadline);
    let Some(status) = got.status.take() else {
        return Err(kill_at_deadline(cmd, pgid, &rx, got));
    };
    let status = status.map_err(|e| fail(format!("waiting for {}: {e}", cmd.program)))?;
    let output = Output {
        status: status.code().unwrap_or(-1),
        tail: got.tail(),
        stdout: String::from_utf8_lossy(&got.stdout).into_owned(),
    };
    if status.code().is_none() {
        return Err(fail(format!("killed by a signal; {}", output.tail)));
    }
    Ok(output)
}

/// Sends what `pipe` yields as `wrap`ped chunks, then [`Event::Closed`]. Once nobody listens
/// it goes on reading and drops what it reads: a daemon writing to the pipe it inherited
/// must not die of a broken pipe.
fn read_pipe<R: Read + Send + 'static>(
    pipe: Option<R>,
    wrap: fn(Vec<u8>) -> Event,
    tx: mpsc::Sender<Event>,
) {
    let Some(mut pipe) = pipe else {
        let _ = tx.send(Event::Closed);
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut listened = true;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => listened = listened && tx.send(wrap(buf[..n].to_vec())).is_ok(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if listened {
            let _ = tx.send(Event::Closed);
        }
    });
}

/// Takes events into `got` until the command exited and both pipes closed, or
/// [`READ_GRACE`] after it exited, or `deadline` if it does not exit.
fn gather(rx: &mpsc::Receiver<Event>, got: &mut Gathered, deadline: Instant) {
    let mut open = 2;
    let mut until = deadline;
    while got.status.is_none() || open > 0 {
        let Ok(event) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) else {
            return;
        };
        match event {
            Event::Stdout(b) => got.stdout.extend(b),
            Event::Stderr(b) => got.stderr.extend(b),
            Event::Closed => open -= 1,
            Event::Exited(status) => {
                got.status = Some(status);
                until = Instant::now() + READ_GRACE;
            }
        }
    }
}

/// Kills process group `pgid` of `cmd`, which ran past its deadline, and waits a little for
/// the command to be reaped; the error names the command, its deadline and its output.
fn kill_at_deadline(
    cmd: &Cmd,
    pgid: u32,
    rx: &mpsc::Receiver<Event>,
    mut got: Gathered,
) -> CommandError {
    let killed = kill_group(pgid);
    gather(rx, &mut got, Instant::now() + KILL_GRACE);
    let mut why = match killed {
        Ok(()) => "its process group was killed".to_string(),
        Err(e) => format!("killing its process group {pgid} failed: {e}"),
    };
    let output = got.tail();
    if !output.trim().is_empty() {
        why.push_str(&format!("; output ends: {}", output.trim()));
    }
    log::warn!("`{}` ran past its deadline; {why}", cmd.display());
    CommandError {
        deadline: Some(cmd.deadline),
        ..CommandError::unfinished(cmd, why)
    }
}

/// SIGKILL to every process of group `pgid`. std signals only the child itself; the shell's
/// `kill` takes a negative pid for a group, whatever tools the host has.
fn kill_group(pgid: u32) -> Result<(), String> {
    let status = Command::new("sh")
        .args(["-c", &format!("kill -KILL -{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`kill -KILL -{pgid}` exited with {status}"))
    }
}

/// The last [`TAIL_BYTES`] of `text`, cut at a character boundary.
pub fn tail(text: &str) -> String {
    if text.len() <= TAIL_BYTES {
        return text.to_string();
    }
    let mut start = text.len() - TAIL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_decides_not_output() {
        let ok = HostRunner::default()
            .check(&Cmd::new("sh", &["-c", "echo failed; exit 0"]))
            .unwrap();
        assert_eq!(ok.status, 0);
        assert_eq!(ok.stdout, "failed\n");
        let e = HostRunner::default()
            .check(&Cmd::new(
                "sh",
                &["-c", "echo Success; echo oops >&2; exit 3"],
            ))
            .unwrap_err();
        assert_eq!(e.status, Some(3));
        assert!(e.tail.contains("Success") && e.tail.contains("oops"), "{e}");
        assert!(e.to_string().contains("exited with status 3"), "{e}");
    }

    #[test]
    fn missing_program_is_an_error_naming_it() {
        let e = HostRunner::default()
            .run(&Cmd::new("no-such-command-here", &[]))
            .unwrap_err();
        assert_eq!(e.status, None);
        assert!(e.to_string().contains("no-such-command-here"), "{e}");
    }

    #[test]
    fn secrets_reach_the_child_but_never_the_error() {
        let cmd = Cmd::new("sh", &["-c", "[ \"${#TOKEN}\" = 7 ] && exit 4"])
            .env("MDM_IP", "10.0.0.1,10.0.0.2")
            .secret_env("TOKEN", "hunter2");
        let e = HostRunner::default().check(&cmd).unwrap_err();
        assert_eq!(e.status, Some(4), "the child saw the secret");
        let shown = format!("{e} {cmd:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("TOKEN=<secret>") && shown.contains("MDM_IP=10.0.0.1,10.0.0.2"));
    }

    #[test]
    fn stdin_secrets_reach_the_child_but_never_the_error() {
        let cmd = Cmd::new(
            "sh",
            &[
                "-c",
                "read a; read b; [ \"$a\" = one ] && [ \"${#b}\" = 5 ] && exit 5",
            ],
        )
        .secret_stdin("one")
        .secret_stdin("Two-2");
        let e = HostRunner::default().check(&cmd).unwrap_err();
        assert_eq!(e.status, Some(5), "the child read both lines");
        let shown = format!("{e} {cmd:?}");
        assert!(!shown.contains("Two-2"), "{shown}");
        assert!(shown.contains("<2 secret line(s)>"), "{shown}");
    }

    #[test]
    fn tails_are_bounded() {
        let long = "é".repeat(3000);
        let t = tail(&long);
        assert!(t.len() <= TAIL_BYTES + 3 && t.starts_with("..."));
        let big = HostRunner::default()
            .check(&Cmd::new("sh", &["-c", "yes x | head -c 100000; exit 1"]))
            .unwrap_err();
        assert!(big.tail.len() <= TAIL_BYTES + 3);
    }

    /// Runs `cmd` on its own thread: a runner that hangs fails the test after `limit`
    /// instead of hanging it.
    fn run_within(cmd: Cmd, limit: Duration) -> Option<Result<Output, CommandError>> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(HostRunner::default().run(&cmd));
        });
        rx.recv_timeout(limit).ok()
    }

    #[test]
    fn a_run_stuck_past_its_deadline_is_given_up_with_an_error_naming_it() {
        fn stuck(_: &Cmd) -> Result<Output, CommandError> {
            loop {
                std::thread::park();
            }
        }
        let cmd = Cmd::new("rpm", &["-q", "zip"])
            .secret_env("TOKEN", "hunter2")
            .deadline(Duration::from_millis(50));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut abandoned = Vec::new();
            let result = bounded(&cmd, Duration::from_millis(50), stuck, &mut abandoned);
            let _ = tx.send((result, abandoned.len()));
        });
        let (result, abandoned) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the guarded run came back");
        assert_eq!(abandoned, 1, "the stuck run is remembered");
        let e = result.unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("TOKEN=<secret> rpm -q zip"), "{shown}");
        assert!(shown.contains("did not return within 100ms"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            (e.status, e.deadline),
            (None, Some(Duration::from_millis(50)))
        );
    }

    #[test]
    fn a_run_within_its_deadline_returns_its_own_result() {
        let cmd = Cmd::new("sh", &["-c", "echo here; exit 3"]);
        let mut abandoned = Vec::new();
        let out = bounded(&cmd, Duration::ZERO, spawn, &mut abandoned).unwrap();
        assert_eq!((out.status, out.stdout.as_str()), (3, "here\n"));
        assert!(abandoned.is_empty());
    }

    #[test]
    fn a_run_that_panics_is_an_error_not_a_stuck_run() {
        fn panics(_: &Cmd) -> Result<Output, CommandError> {
            panic!("no thread for a pipe");
        }
        let mut abandoned = Vec::new();
        let cmd = Cmd::new("rpm", &["-q", "zip"]);
        let e = bounded(&cmd, Duration::ZERO, panics, &mut abandoned).unwrap_err();
        assert!(e.to_string().contains("ended without a result"), "{e}");
        assert!(abandoned.is_empty(), "nothing is left running");
    }

    #[test]
    fn no_command_starts_while_too_many_given_up_runs_are_stuck() {
        let (mut runs, abandoned): (Vec<_>, Vec<_>) =
            (0..MAX_ABANDONED).map(|_| mpsc::channel()).unzip();
        let mut runner = HostRunner { abandoned };
        let file = pid_file("not-started");
        let cmd = Cmd::new("sh", &["-c", &format!("touch {}", file.display())]);
        let e = runner.run(&cmd).unwrap_err();
        assert!(
            e.to_string().contains("not started: 4 earlier commands"),
            "{e}"
        );
        assert!(!file.exists(), "the command ran");
        // One of them ends: commands start again.
        drop(runs.remove(0));
        assert_eq!(runner.run(&cmd).unwrap().status, 0);
        assert!(file.exists());
        let _ = std::fs::remove_file(&file);
    }

    /// The pids a test script wrote to `file`, once it has written them.
    fn pids_in(file: &std::path::Path, want: usize) -> Vec<u32> {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let pids: Vec<u32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.len() == want && text.ends_with('\n') {
                return pids;
            }
            assert!(
                std::time::Instant::now() < until,
                "{} never held {want} pids",
                file.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether `pid` still runs (a zombie waiting for its parent does not).
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            let state = s.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|r| r.starts_with('Z') || r.starts_with('X'))
        })
    }

    fn gone_within(pid: u32, limit: Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while alive(pid) {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn kill(pids: &[u32]) {
        for pid in pids {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    fn pid_file(name: &str) -> std::path::PathBuf {
        let f = std::env::temp_dir().join(format!("executor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&f);
        f
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_its_process_group() {
        let file = pid_file("deadline");
        let script = format!(
            "sleep 600 & echo $$ $! > {}; exec sleep 600",
            file.display()
        );
        let cmd = Cmd::new("sh", &["-c", &script])
            .secret_env("TOKEN", "hunter2")
            .deadline(Duration::from_secs(1));
        let started = std::time::Instant::now();
        let result = run_within(cmd, Duration::from_secs(15));
        let pids = pids_in(&file, 2);
        let _ = std::fs::remove_file(&file);
        let Some(result) = result else {
            kill(&pids);
            panic!("HostRunner did not return within 15 s of a command with a 1 s deadline");
        };
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let e = result.unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("TOKEN=<secret> sh -c sleep 600 &"),
            "{shown}"
        );
        assert!(shown.contains("deadline of 1s"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!((e.status, e.deadline), (None, Some(Duration::from_secs(1))));
        for pid in &pids {
            let gone = gone_within(*pid, Duration::from_secs(5));
            if !gone {
                kill(&pids);
            }
            assert!(gone, "pid {pid} of the killed command's group still runs");
        }
    }

    #[test]
    fn a_daemon_holding_the_pipes_does_not_hold_the_command() {
        let file = pid_file("daemon");
        let script = format!("sleep 600 & echo $! > {}; echo started", file.display());
        let started = std::time::Instant::now();
        let result = run_within(Cmd::new("sh", &["-c", &script]), Duration::from_secs(15));
        let daemon = pids_in(&file, 1);
        let _ = std::fs::remove_file(&file);
        kill(&daemon);
        let out = result
            .expect("HostRunner did not return within 15 s: it waited for the daemon's pipes")
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!((out.status, out.stdout.as_str()), (0, "started\n"));
    }
}
