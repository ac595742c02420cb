//! What a running executor finds wrong on its own host (the host's half of the health model;
//! the gateway's half is read by the scheduler). The executor keeps checking its host after
//! `running` and sends a [`HostReport`] only when what it finds changes: an unchanged host
//! costs nothing on the wire beyond the plan poll.

use serde::{Deserialize, Serialize};

/// Everything the last check found wrong; empty: the host is as the executor left it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostReport {
    #[serde(default)]
    pub problems: Vec<HostProblem>,
}

/// One thing found wrong on the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostProblem {
    pub check: HostCheck,
    /// What was checked: the service (`sds`, `lia`, `mdm`, `rexray`), the module (`scini`) or
    /// the device path (`/dev/sdb`).
    pub subject: String,
    /// What was found, one log-safe line (`not running (status 3)`, `missing`).
    pub detail: String,
}

/// The kinds of host check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostCheck {
    /// A storage service the executor installed (SDS, LIA, MDM).
    Service,
    /// A kernel module (the SDC's `scini`).
    Module,
    /// A device the node's SDS serves.
    Device,
    /// The volume driver's service (REX-Ray).
    VolumeDriver,
}

impl HostProblem {
    pub fn new(check: HostCheck, subject: &str, detail: &str) -> HostProblem {
        HostProblem {
            check,
            subject: subject.to_string(),
            detail: detail.to_string(),
        }
    }

    /// `service sds: not running (status 3)`: how it reads in a reason.
    pub fn reason(&self) -> String {
        let kind = match self.check {
            HostCheck::Service => "service",
            HostCheck::Module => "module",
            HostCheck::Device => "device",
            HostCheck::VolumeDriver => "volume driver",
        };
        format!("{kind} {}: {}", self.subject, self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_as_json_with_kebab_case_checks() {
        let r = HostReport {
            problems: vec![HostProblem::new(
                HostCheck::VolumeDriver,
                "rexray",
                "not running",
            )],
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"problems":[{"check":"volume-driver","subject":"rexray","detail":"not running"}]}"#
        );
        assert_eq!(serde_json::from_str::<HostReport>(&json).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<HostReport>("{}").unwrap(),
            HostReport::default()
        );
        assert_eq!(r.problems[0].reason(), "volume driver rexray: not running");
    }
}
