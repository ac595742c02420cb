//! A [`Runner`] for unit tests: it records every command's log-safe line and answers each
//! with the exit status and standard output its script gives, so that tests check the exact
//! command sequence a step runs without the host's tools.

use super::commands::{Cmd, CommandError, Output, Runner};

pub struct Scripted<F> {
    /// Every command run, as [`Cmd::display`] shows it.
    pub ran: Vec<String>,
    answer: F,
}

impl<F: FnMut(&Cmd) -> (i32, String)> Scripted<F> {
    pub fn new(answer: F) -> Scripted<F> {
        Scripted {
            ran: Vec::new(),
            answer,
        }
    }
}

impl<F: FnMut(&Cmd) -> (i32, String)> Runner for Scripted<F> {
    fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
        self.ran.push(cmd.display());
        let (status, stdout) = (self.answer)(cmd);
        Ok(Output {
            status,
            tail: stdout.clone(),
            stdout,
        })
    }
}
