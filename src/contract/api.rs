//! The executor API (design section 5): `/api/v1/executors/<id>/<action>`, every call with
//! the executor's secret as a bearer token. [`ROUTES`] is the one table of its actions: the
//! scheduler's router and its early secret check read it, and the executor's client builds
//! its calls from it.

use super::Phase;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::time::Duration;

/// Every executor API path starts with this, then the (percent-encoded) executor id.
pub const PREFIX: &str = "/api/v1/executors/";

/// The plan's query parameters: the version the executor holds, and how long it may wait
/// for another (whole seconds).
pub const PLAN_VERSION_PARAM: &str = "version";
pub const PLAN_WAIT_PARAM: &str = "wait";
/// `nudge=1` (with `version`, no wait): an idle executor's plan request. Answered at once,
/// 304 when `version` is current, else 200 with the plan; either way the scheduler then owes
/// the executor one framework MESSAGE ([`super::env::NUDGE_PLAN_VERSION`]) when its plan
/// moves past the version it holds now: a running node waits for a change without holding a
/// connection, and a new plan needs no second request to register.
pub const PLAN_NUDGE_PARAM: &str = "nudge";
/// In the answer to a phase report of `running`, or of `storage-attach` (after which the
/// executor waits for its disks to join the pool)
/// (`{"recorded":true,"nudge_past":7,"plan":{"version":7,...}}`): the scheduler registered
/// the executor as a `nudge=1` request holding plan 7 would have, and the answer carries that
/// plan (the node's own reports change it: its phase, its resume point). The executor takes
/// it and waits for the nudge without asking first: at 10,000 nodes that request was one
/// connection (and TLS handshake) in ten of a rollout's. A scheduler of an older build
/// answers `{"recorded":true}`, and the executor then asks with `nudge=1` (one of a build
/// before `storage-attach` registered answers a report of that phase so).
pub const NUDGE_PAST_FIELD: &str = "nudge_past";
/// The plan in the answer to a phase report of `running` or `storage-attach`
/// ([`NUDGE_PAST_FIELD`]).
pub const REPORT_PLAN_FIELD: &str = "plan";
/// In the answer to a phase report that carried devices ([`PhaseReport::devices`]):
/// `"devices_recorded":true`, the devices are the node's. A scheduler of an older build reads
/// no devices in a phase report and answers without it; the executor then sends them by
/// `POST devices`, as it always did.
pub const DEVICES_RECORDED_FIELD: &str = "devices_recorded";
/// The longest plan wait the scheduler grants.
pub const MAX_PLAN_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// One call of the executor API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The node plan (long poll with `version` and `wait`).
    Plan,
    /// A [`PhaseReport`].
    Phase,
    /// A [`DevicesReport`].
    Devices,
    /// A sign of life; no body needed.
    Heartbeat,
    /// A [`super::health::HostReport`]: what a running executor finds wrong on its host,
    /// sent when that changes.
    Health,
    /// A [`super::rollout::RolloutReport`]: one event of a running node's day-two walk.
    Rollout,
}

/// An action, the last segment of its path, and its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub action: Action,
    pub segment: &'static str,
    pub method: Method,
}

/// Every action of the executor API, in the order error messages list them.
pub const ROUTES: [Route; 6] = [
    Route {
        action: Action::Plan,
        segment: "plan",
        method: Method::Get,
    },
    Route {
        action: Action::Phase,
        segment: "phase",
        method: Method::Post,
    },
    Route {
        action: Action::Devices,
        segment: "devices",
        method: Method::Post,
    },
    Route {
        action: Action::Heartbeat,
        segment: "heartbeat",
        method: Method::Post,
    },
    Route {
        action: Action::Health,
        segment: "health",
        method: Method::Post,
    },
    Route {
        action: Action::Rollout,
        segment: "rollout",
        method: Method::Post,
    },
];

impl Action {
    pub fn route(self) -> &'static Route {
        let i = match self {
            Action::Plan => 0,
            Action::Phase => 1,
            Action::Devices => 2,
            Action::Heartbeat => 3,
            Action::Health => 4,
            Action::Rollout => 5,
        };
        &ROUTES[i]
    }

    pub fn segment(self) -> &'static str {
        self.route().segment
    }

    pub fn method(self) -> Method {
        self.route().method
    }

    /// The action of a path's last segment.
    pub fn from_segment(segment: &str) -> Option<Action> {
        ROUTES
            .iter()
            .find(|r| r.segment == segment)
            .map(|r| r.action)
    }

    /// The methods the route accepts, as HTTP names (one each today).
    pub fn allowed_methods(self) -> &'static [&'static str] {
        match self.method() {
            Method::Get => &["GET"],
            Method::Post => &["POST"],
        }
    }
}

/// `plan, phase, devices, heartbeat, health or rollout`: the segments, for error messages.
pub fn segments_listed() -> String {
    let names: Vec<&str> = ROUTES.iter().map(|r| r.segment).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// `/api/v1/executors/<id>/<action>` for an id that needs no percent-encoding (ids of the
/// [`super::ids`] scheme never do).
pub fn path(executor_id: &str, action: Action) -> String {
    format!("{PREFIX}{executor_id}/{}", action.segment())
}

/// The raw (still percent-encoded) executor id and the action segment of a path under
/// [`PREFIX`]; `None` for other paths.
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix(PREFIX)?.split_once('/')
}

/// `POST phase`: the phase the executor enters (or failed in), with an optional message,
/// error and warning (a non-fatal problem shown with the node until a report without it).
/// The scheduler reads the phase as text first (`PhaseReport<String>`), to answer an unknown
/// one by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseReport<P = Phase> {
    pub phase: P,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// With a reboot phase: the executor asks to reboot the host now. The scheduler answers
    /// 409 with the reason when the disruption budget has no room (another node of the
    /// domain, or another MDM member, is not back); once recorded, the node counts as down
    /// until it reports a phase after the reboot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebooting: bool,
    /// The usable devices the phase before (`devices`) found, told with the next phase's
    /// report rather than by `POST devices`: one request fewer per node, and the scheduler
    /// records them before the phase, as it would have had them in order. Checked as a
    /// [`DevicesReport`]'s are; the answer says [`DEVICES_RECORDED_FIELD`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
}

impl PhaseReport {
    /// A report of entering `phase`.
    pub fn entered(phase: Phase) -> PhaseReport {
        PhaseReport {
            phase,
            message: None,
            error: None,
            warning: None,
            rebooting: false,
            devices: None,
        }
    }

    /// A report that `phase` failed with `error`.
    pub fn failed(phase: Phase, error: String) -> PhaseReport {
        PhaseReport {
            error: Some(error),
            ..PhaseReport::entered(phase)
        }
    }
}

/// The answer to a report as the executor reads it: `{"recorded":true}`, to a report of
/// `running` the plan it registered the executor's nudge past ([`NUDGE_PAST_FIELD`],
/// [`REPORT_PLAN_FIELD`]; the scheduler writes the plan's bytes as they are), and to one
/// that carried devices [`DEVICES_RECORDED_FIELD`]. Typed, so that
/// the executor reads the plan with the deserializer its plan requests use.
#[derive(Debug, Deserialize)]
pub struct ReportAnswer<P> {
    #[serde(default)]
    pub nudge_past: Option<u64>,
    /// [`DEVICES_RECORDED_FIELD`].
    #[serde(default)]
    pub devices_recorded: bool,
    #[serde(default = "none")]
    pub plan: Option<P>,
}

fn none<P>() -> Option<P> {
    None
}

/// `POST devices`: the usable devices the executor found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicesReport<'a> {
    pub devices: Cow<'a, [String]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names the scheduler writes are the ones the executor reads.
    #[test]
    fn a_report_answer_is_read_by_the_names_it_is_written_with() {
        let written =
            format!(r#"{{"recorded":true,"{NUDGE_PAST_FIELD}":7,"{REPORT_PLAN_FIELD}":[7]}}"#);
        let a: ReportAnswer<Vec<u64>> = serde_json::from_str(&written).unwrap();
        assert_eq!((a.nudge_past, a.plan), (Some(7), Some(vec![7])));
        assert!(!a.devices_recorded);
        let written = format!(r#"{{"recorded":true,"{DEVICES_RECORDED_FIELD}":true}}"#);
        let a: ReportAnswer<Vec<u64>> = serde_json::from_str(&written).unwrap();
        assert!(a.devices_recorded);
        let a: ReportAnswer<Vec<u64>> = serde_json::from_str(r#"{"recorded":true}"#).unwrap();
        assert_eq!(
            (a.nudge_past, a.plan, a.devices_recorded),
            (None, None, false)
        );
    }

    #[test]
    fn every_action_has_one_route_and_its_path_leads_back_to_it() {
        for r in ROUTES {
            assert_eq!(r.action.route(), &r);
            assert_eq!(Action::from_segment(r.segment), Some(r.action));
            let p = path("storage-executor.h.1", r.action);
            assert_eq!(split_path(&p), Some(("storage-executor.h.1", r.segment)));
            assert_eq!(r.action.allowed_methods(), [r.method.as_str()]);
        }
        assert_eq!(Action::from_segment("dance"), None);
        assert_eq!(
            segments_listed(),
            "plan, phase, devices, heartbeat, health or rollout"
        );
        assert_eq!(split_path("/api/state"), None);
    }

    #[test]
    fn reports_keep_their_json() {
        let r = PhaseReport::failed(Phase::Packages, "boom".into());
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"phase":"packages","error":"boom"}"#
        );
        let raw: PhaseReport<String> =
            serde_json::from_str(r#"{"phase":"dancing","warning":"w"}"#).unwrap();
        assert_eq!(
            (raw.phase.as_str(), raw.warning.as_deref()),
            ("dancing", Some("w"))
        );
        let d = DevicesReport {
            devices: vec!["/dev/sdb".to_string()].into(),
        };
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"devices":["/dev/sdb"]}"#
        );
    }
}
