//! Services through the platform's init system (host-steps.md sections 7 and 9), as its
//! profile names it (`service <name> <verb>` or `systemctl <verb> <name>`). Whether a
//! service runs is read from its state query's exit status (LSB scripts and systemd both: 0
//! running, 3 not running), never from its wording.

use super::commands::{Cmd, CommandError, Runner};
use storage_framework::contract::platform::{profile, Platform, ServiceManager};

/// One service on one platform.
#[derive(Debug, Clone, Copy)]
pub struct Service<'a> {
    platform: Platform,
    name: &'a str,
}

/// What a service's state query said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running,
    Stopped,
    /// Any other exit status: the query's log-safe line and its status.
    Unknown {
        query: String,
        status: i32,
    },
}

impl<'a> Service<'a> {
    pub fn new(platform: Platform, name: &'a str) -> Service<'a> {
        Service { platform, name }
    }

    fn manager(&self) -> ServiceManager {
        profile(self.platform).services
    }

    fn cmd(&self, verb: &str) -> Cmd {
        let (program, args) = self.manager().command(self.name, verb);
        let deadline = match verb {
            "start" | "restart" | "stop" => Cmd::SERVICE_DEADLINE,
            _ => Cmd::QUERY_DEADLINE,
        };
        Cmd::new(program, &args).deadline(deadline)
    }

    /// The query whose exit status says whether the service runs.
    fn state_query(&self) -> Cmd {
        self.cmd(self.manager().state_query())
    }

    pub fn start(&self, r: &mut dyn Runner) -> Result<(), CommandError> {
        r.check(&self.cmd("start")).map(drop)
    }

    pub fn stop(&self, r: &mut dyn Runner) -> Result<(), CommandError> {
        r.check(&self.cmd("stop")).map(drop)
    }

    pub fn restart(&self, r: &mut dyn Runner) -> Result<(), CommandError> {
        r.check(&self.cmd("restart")).map(drop)
    }

    /// Fails, with the query's status and output, unless the service runs.
    pub fn check_running(&self, r: &mut dyn Runner) -> Result<(), CommandError> {
        r.check(&self.state_query()).map(drop)
    }

    pub fn state(&self, r: &mut dyn Runner) -> Result<State, CommandError> {
        let query = self.state_query();
        Ok(match r.run(&query)?.status {
            0 => State::Running,
            3 => State::Stopped,
            status => State::Unknown {
                query: query.display(),
                status,
            },
        })
    }

    /// Makes the service start at boot unless its init system says it does.
    pub fn enable_at_boot(&self, r: &mut dyn Runner) -> Result<(), CommandError> {
        // `service` has no such verb: a package's rc links start its SysV script at boot.
        if self.manager().enables_at_boot() && r.run(&self.cmd("is-enabled"))?.status != 0 {
            r.check(&self.cmd("enable"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scripted::Scripted;

    #[test]
    fn verbs_and_state_queries_per_platform() {
        // Not enabled, and stopped.
        let mut r = Scripted::new(|c: &Cmd| {
            let status = match c.args[0].as_str() {
                "is-enabled" => 1,
                "enable" => 0,
                _ => 3,
            };
            (status, String::new())
        });
        let rhel = Service::new(Platform::Rhel7, "rexray");
        rhel.enable_at_boot(&mut r).unwrap();
        let state = rhel.state(&mut r).unwrap();
        assert_eq!(state, State::Stopped);
        let ubuntu = Service::new(Platform::Ubuntu1404, "rexray");
        ubuntu.enable_at_boot(&mut r).unwrap();
        assert_eq!(ubuntu.state(&mut r).unwrap(), State::Stopped);
        assert_eq!(
            r.ran,
            [
                "systemctl is-enabled rexray",
                "systemctl enable rexray",
                "systemctl is-active rexray",
                "service rexray status"
            ]
        );
    }

    #[test]
    fn other_statuses_are_unknown_states_and_failed_checks() {
        let mut r = Scripted::new(|_: &Cmd| (4, "no such unit".to_string()));
        let svc = Service::new(Platform::Rhel7, "scaleio-gateway");
        assert_eq!(
            svc.state(&mut r).unwrap(),
            State::Unknown {
                query: "systemctl is-active scaleio-gateway".into(),
                status: 4
            }
        );
        let e = svc.check_running(&mut r).unwrap_err();
        assert_eq!(e.status, Some(4));
        assert!(e.to_string().contains("no such unit"), "{e}");
        let e = svc.enable_at_boot(&mut r).unwrap_err();
        assert_eq!(e.command, "systemctl enable scaleio-gateway");
    }

    #[test]
    fn starts_wait_for_the_daemon_and_queries_do_not() {
        let mut seen = Vec::new();
        let mut r = Scripted::new(|c: &Cmd| {
            seen.push((c.args[0].clone(), c.deadline));
            (0, String::new())
        });
        let svc = Service::new(Platform::Rhel7, "rexray");
        svc.restart(&mut r).unwrap();
        svc.start(&mut r).unwrap();
        svc.check_running(&mut r).unwrap();
        drop(r);
        assert_eq!(
            seen,
            [
                ("restart".to_string(), Cmd::SERVICE_DEADLINE),
                ("start".to_string(), Cmd::SERVICE_DEADLINE),
                ("is-active".to_string(), Cmd::QUERY_DEADLINE),
            ]
        );
    }
}
