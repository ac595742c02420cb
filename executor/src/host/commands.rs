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

use std::fmt;
use std::io::Read;
use std::process::{Command, Stdio};

/// Bytes of combined output kept for an error message.
pub const TAIL_BYTES: usize = 2048;

/// One command line to run.
#[derive(Clone, Default)]
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
}

impl Cmd {
    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Cmd::default()
        }
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
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "`{}` exited with status {s}", self.command)?,
            None => write!(f, "`{}` did not finish", self.command)?,
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
            return Err(CommandError {
                command: cmd.display(),
                status: Some(out.status),
                tail: out.tail,
            });
        }
        Ok(out)
    }
}

/// Commands on this host, with no stdin unless the command has `secret_stdin`.
pub struct HostRunner;

impl Runner for HostRunner {
    fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
        spawn(cmd)
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
        .stderr(Stdio::piped());
    for (n, v) in cmd.env.iter().chain(&cmd.secret_env) {
        command.env(n, v);
    }
    let fail = |why: String| CommandError {
        command: cmd.display(),
        status: None,
        tail: why,
    };
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
    // stderr is drained on its own thread so that neither pipe can fill and block the child.
    let mut err_pipe = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let mut out = Vec::new();
    if let Some(mut p) = child.stdout.take() {
        let _ = p.read_to_end(&mut out);
    }
    let err = err_reader.join().unwrap_or_default();
    let status = child
        .wait()
        .map_err(|e| fail(format!("waiting for {}: {e}", cmd.program)))?;
    let stdout = String::from_utf8_lossy(&out).into_owned();
    let mut both = stdout.clone();
    both.push_str(&String::from_utf8_lossy(&err));
    let output = Output {
        status: status.code().unwrap_or(-1),
        stdout,
        tail: tail(&both),
    };
    if status.code().is_none() {
        return Err(CommandError {
            command: cmd.display(),
            status: None,
            tail: format!("killed by a signal; {}", output.tail),
        });
    }
    Ok(output)
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
        let ok = HostRunner
            .check(&Cmd::new("sh", &["-c", "echo failed; exit 0"]))
            .unwrap();
        assert_eq!(ok.status, 0);
        assert_eq!(ok.stdout, "failed\n");
        let e = HostRunner
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
        let e = HostRunner
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
        let e = HostRunner.check(&cmd).unwrap_err();
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
        let e = HostRunner.check(&cmd).unwrap_err();
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
        let big = HostRunner
            .check(&Cmd::new("sh", &["-c", "yes x | head -c 100000; exit 1"]))
            .unwrap_err();
        assert!(big.tail.len() <= TAIL_BYTES + 3);
    }
}
