//! The v1 executor API (`mesos.executor` package): the `Call`s an executor sends to its
//! agent's `/api/v1/executor` and the `Event`s the agent streams back.

use crate::mesos::types::{
    AgentInfo, ContainerID, ExecutorID, ExecutorInfo, FrameworkID, FrameworkInfo, KillPolicy,
    TaskGroupInfo, TaskID, TaskInfo, TaskStatus,
};
use crate::mesos::{Bytes, Str};
use crate::message;

message! {
    Event = "mesos.executor.Event" {
        opt 1 r#type: event::Type,
        opt 2 subscribed: event::Subscribed,
        opt 3 acknowledged: event::Acknowledged,
        opt 4 launch: event::Launch,
        opt 5 kill: event::Kill,
        opt 6 message: event::Message,
        opt 7 error: event::Error,
        opt 8 launch_group: event::LaunchGroup,
    }
}

pub mod event {
    use super::*;
    use crate::enumeration;

    enumeration! {
        Type {
            Unknown = 0 "UNKNOWN",
            Subscribed = 1 "SUBSCRIBED",
            Launch = 2 "LAUNCH",
            LaunchGroup = 8 "LAUNCH_GROUP",
            Kill = 3 "KILL",
            Acknowledged = 4 "ACKNOWLEDGED",
            Message = 5 "MESSAGE",
            Error = 6 "ERROR",
            Shutdown = 7 "SHUTDOWN",
            // Added to executor.proto in Mesos 1.5 (absent from older copies of the file).
            Heartbeat = 9 "HEARTBEAT",
        }
    }

    message! {
        Subscribed = "mesos.executor.Event.Subscribed" {
            req 1 executor_info: ExecutorInfo,
            req 2 framework_info: FrameworkInfo,
            req 3 agent_info: AgentInfo,
            opt 4 container_id: ContainerID,
        }
    }
    message! { Launch = "mesos.executor.Event.Launch" { req 1 task: TaskInfo } }
    message! { LaunchGroup = "mesos.executor.Event.LaunchGroup" { req 1 task_group: TaskGroupInfo } }
    message! {
        Kill = "mesos.executor.Event.Kill" {
            req 1 task_id: TaskID,
            opt 2 kill_policy: KillPolicy,
        }
    }
    message! {
        Acknowledged = "mesos.executor.Event.Acknowledged" {
            req 1 task_id: TaskID,
            req 2 uuid: Bytes,
        }
    }
    message! { Message = "mesos.executor.Event.Message" { req 1 data: Bytes } }
    message! { Error = "mesos.executor.Event.Error" { req 1 message: Str } }
}

message! {
    Call = "mesos.executor.Call" {
        req 1 executor_id: ExecutorID,
        req 2 framework_id: FrameworkID,
        opt 3 r#type: call::Type,
        opt 4 subscribe: call::Subscribe,
        opt 5 update: call::Update,
        opt 6 message: call::Message,
    }
}

pub mod call {
    use super::*;
    use crate::enumeration;

    enumeration! {
        Type {
            Unknown = 0 "UNKNOWN",
            Subscribe = 1 "SUBSCRIBE",
            Update = 2 "UPDATE",
            Message = 3 "MESSAGE",
        }
    }

    message! {
        Subscribe = "mesos.executor.Call.Subscribe" {
            rep 1 unacknowledged_tasks: TaskInfo,
            rep 2 unacknowledged_updates: Update,
        }
    }
    message! { Update = "mesos.executor.Call.Update" { req 1 status: TaskStatus } }
    message! { Message = "mesos.executor.Call.Message" { req 2 data: Bytes } }
}
