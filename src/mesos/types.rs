//! Messages of the `mesos` proto package that a framework and its executor use.
//!
//! Field numbers and labels are those of the official `mesos.proto` (Debian's
//! `golang-github-mesos-mesos-go-dev`); fields this framework never reads or writes are left
//! out and skipped on decode like any unknown field. Nested proto messages live in a module
//! named after their parent (`value::Scalar` is `mesos.Value.Scalar`).

use crate::mesos::{Bytes, Str};
use crate::{enumeration, message};

message! { FrameworkID = "mesos.FrameworkID" { req 1 value: Str } }
message! { OfferID = "mesos.OfferID" { req 1 value: Str } }
message! { AgentID = "mesos.AgentID" { req 1 value: Str } }
message! { TaskID = "mesos.TaskID" { req 1 value: Str } }
message! { OperationID = "mesos.OperationID" { req 1 value: Str } }
message! { ExecutorID = "mesos.ExecutorID" { req 1 value: Str } }
message! {
    ContainerID = "mesos.ContainerID" {
        req 1 value: Str,
        opt 2 parent: Box<ContainerID>,
    }
}
message! { TimeInfo = "mesos.TimeInfo" { req 1 nanoseconds: i64 } }
message! { DurationInfo = "mesos.DurationInfo" { req 1 nanoseconds: i64 } }

message! {
    /// When a machine may be away for maintenance: from `start`, for `duration` (forever
    /// when unset).
    Unavailability = "mesos.Unavailability" {
        req 1 start: TimeInfo,
        opt 2 duration: DurationInfo,
    }
}

message! {
    /// A machine as the maintenance primitives name it.
    MachineID = "mesos.MachineID" {
        opt 1 hostname: Str,
        opt 2 ip: Str,
    }
}

message! {
    Address = "mesos.Address" {
        opt 1 hostname: Str,
        opt 2 ip: Str,
        req 3 port: i32,
    }
}

message! { Parameter = "mesos.Parameter" { req 1 key: Str, req 2 value: Str } }

message! {
    Url = "mesos.URL" {
        req 1 scheme: Str,
        req 2 address: Address,
        opt 3 path: Str,
        rep 4 query: Parameter,
        opt 5 fragment: Str,
    }
}

message! {
    FrameworkInfo = "mesos.FrameworkInfo" {
        req 1 user: Str,
        req 2 name: Str,
        opt 3 id: FrameworkID,
        opt 4 failover_timeout: f64,
        opt 5 checkpoint: bool,
        opt 6 role: Str,
        opt 7 hostname: Str,
        opt 8 principal: Str,
        opt 9 webui_url: Str,
        rep 10 capabilities: framework_info::Capability,
        opt 11 labels: Labels,
        rep 12 roles: Str,
    }
}

pub mod framework_info {
    use super::*;
    message! { Capability = "mesos.FrameworkInfo.Capability" { opt 1 r#type: capability::Type } }
    pub mod capability {
        use super::*;
        enumeration! {
            Type {
                Unknown = 0 "UNKNOWN",
                RevocableResources = 1 "REVOCABLE_RESOURCES",
                TaskKillingState = 2 "TASK_KILLING_STATE",
                GpuResources = 3 "GPU_RESOURCES",
                SharedResources = 4 "SHARED_RESOURCES",
                PartitionAware = 5 "PARTITION_AWARE",
                MultiRole = 6 "MULTI_ROLE",
                ReservationRefinement = 7 "RESERVATION_REFINEMENT",
                RegionAware = 8 "REGION_AWARE",
            }
        }
    }
}

message! { KillPolicy = "mesos.KillPolicy" { opt 1 grace_period: DurationInfo } }

message! {
    CommandInfo = "mesos.CommandInfo" {
        rep 1 uris: command_info::Uri,
        opt 2 environment: Environment,
        opt 3 value: Str,
        opt 5 user: Str,
        opt 6 shell: bool,
        rep 7 arguments: Str,
    }
}

pub mod command_info {
    use crate::mesos::Str;
    use crate::message;
    message! {
        Uri = "mesos.CommandInfo.URI" {
            req 1 value: Str,
            opt 2 executable: bool,
            opt 3 extract: bool,
            opt 4 cache: bool,
            opt 5 output_file: Str,
        }
    }
}

message! {
    ExecutorInfo = "mesos.ExecutorInfo" {
        req 1 executor_id: ExecutorID,
        opt 4 data: Bytes,
        rep 5 resources: Resource,
        opt 7 command: CommandInfo,
        opt 8 framework_id: FrameworkID,
        opt 9 name: Str,
        opt 10 source: Str,
        opt 13 shutdown_grace_period: DurationInfo,
        opt 14 labels: Labels,
        opt 15 r#type: executor_info::Type,
    }
}

pub mod executor_info {
    use crate::enumeration;
    enumeration! { Type { Unknown = 0 "UNKNOWN", Default = 1 "DEFAULT", Custom = 2 "CUSTOM" } }
}

message! { DomainInfo = "mesos.DomainInfo" { opt 1 fault_domain: domain_info::FaultDomain } }

pub mod domain_info {
    use crate::message;
    message! {
        FaultDomain = "mesos.DomainInfo.FaultDomain" {
            req 1 region: fault_domain::RegionInfo,
            req 2 zone: fault_domain::ZoneInfo,
        }
    }
    pub mod fault_domain {
        use crate::mesos::Str;
        use crate::message;
        message! { RegionInfo = "mesos.DomainInfo.FaultDomain.RegionInfo" { req 1 name: Str } }
        message! { ZoneInfo = "mesos.DomainInfo.FaultDomain.ZoneInfo" { req 1 name: Str } }
    }
}

message! {
    MasterInfo = "mesos.MasterInfo" {
        req 1 id: Str,
        req 2 ip: u32,
        req 3 port: u32,
        opt 4 pid: Str,
        opt 5 hostname: Str,
        opt 6 version: Str,
        opt 7 address: Address,
        opt 8 domain: DomainInfo,
    }
}

message! {
    AgentInfo = "mesos.AgentInfo" {
        req 1 hostname: Str,
        rep 3 resources: Resource,
        rep 5 attributes: Attribute,
        opt 6 id: AgentID,
        opt 8 port: i32,
        opt 10 domain: DomainInfo,
    }
}

message! {
    Value = "mesos.Value" {
        req 1 r#type: value::Type,
        opt 2 scalar: value::Scalar,
        opt 3 ranges: value::Ranges,
        opt 4 set: value::Set,
        opt 5 text: value::Text,
    }
}

pub mod value {
    use crate::mesos::Str;
    use crate::{enumeration, message};
    enumeration! { Type { Scalar = 0 "SCALAR", Ranges = 1 "RANGES", Set = 2 "SET", Text = 3 "TEXT" } }
    message! { Scalar = "mesos.Value.Scalar" { req 1 value: f64 } }
    message! { Range = "mesos.Value.Range" { req 1 begin: u64, req 2 end: u64 } }
    message! { Ranges = "mesos.Value.Ranges" { rep 1 range: Range } }
    message! { Set = "mesos.Value.Set" { rep 1 item: Str } }
    message! { Text = "mesos.Value.Text" { req 1 value: Str } }
}

message! {
    Attribute = "mesos.Attribute" {
        req 1 name: Str,
        req 2 r#type: value::Type,
        opt 3 scalar: value::Scalar,
        opt 4 ranges: value::Ranges,
        opt 5 text: value::Text,
        opt 6 set: value::Set,
    }
}

message! {
    Resource = "mesos.Resource" {
        req 1 name: Str,
        req 2 r#type: value::Type,
        opt 3 scalar: value::Scalar,
        opt 4 ranges: value::Ranges,
        opt 5 set: value::Set,
        opt 6 role: Str,
        opt 8 reservation: Box<resource::ReservationInfo>,
        opt 11 allocation_info: resource::AllocationInfo,
        rep 13 reservations: resource::ReservationInfo,
    }
}

pub mod resource {
    use super::Labels;
    use crate::mesos::Str;
    use crate::{enumeration, message};
    message! { AllocationInfo = "mesos.Resource.AllocationInfo" { opt 1 role: Str } }
    message! {
        ReservationInfo = "mesos.Resource.ReservationInfo" {
            opt 1 principal: Str,
            opt 2 labels: Labels,
            opt 3 role: Str,
            opt 4 r#type: reservation_info::Type,
        }
    }
    pub mod reservation_info {
        use super::*;
        enumeration! { Type { Unknown = 0 "UNKNOWN", Static = 1 "STATIC", Dynamic = 2 "DYNAMIC" } }
    }
}

message! {
    Request = "mesos.Request" {
        opt 1 agent_id: AgentID,
        rep 2 resources: Resource,
    }
}

message! {
    Offer = "mesos.Offer" {
        req 1 id: OfferID,
        req 2 framework_id: FrameworkID,
        req 3 agent_id: AgentID,
        req 4 hostname: Str,
        rep 5 resources: Resource,
        rep 6 executor_ids: ExecutorID,
        rep 7 attributes: Attribute,
        opt 8 url: Url,
        opt 9 unavailability: Box<Unavailability>,
        opt 10 allocation_info: resource::AllocationInfo,
        opt 11 domain: DomainInfo,
    }
}

message! {
    /// The master asks for an agent back: its machine is scheduled for maintenance.
    InverseOffer = "mesos.InverseOffer" {
        req 1 id: OfferID,
        opt 2 url: Url,
        req 3 framework_id: FrameworkID,
        opt 4 agent_id: AgentID,
        req 5 unavailability: Unavailability,
    }
}

pub mod offer {
    use super::*;
    message! {
        Operation = "mesos.Offer.Operation" {
            opt 1 r#type: operation::Type,
            opt 2 launch: operation::Launch,
            opt 7 launch_group: operation::LaunchGroup,
            opt 12 id: OperationID,
        }
    }
    pub mod operation {
        use super::*;
        enumeration! {
            Type {
                Unknown = 0 "UNKNOWN",
                Launch = 1 "LAUNCH",
                LaunchGroup = 6 "LAUNCH_GROUP",
                Reserve = 2 "RESERVE",
                Unreserve = 3 "UNRESERVE",
                Create = 4 "CREATE",
                Destroy = 5 "DESTROY",
            }
        }
        message! { Launch = "mesos.Offer.Operation.Launch" { rep 1 task_infos: TaskInfo } }
        message! {
            LaunchGroup = "mesos.Offer.Operation.LaunchGroup" {
                req 1 executor: ExecutorInfo,
                req 2 task_group: TaskGroupInfo,
            }
        }
    }
}

message! {
    TaskInfo = "mesos.TaskInfo" {
        req 1 name: Str,
        req 2 task_id: TaskID,
        req 3 agent_id: AgentID,
        rep 4 resources: Resource,
        opt 5 executor: ExecutorInfo,
        opt 6 data: Bytes,
        opt 7 command: CommandInfo,
        opt 10 labels: Labels,
        opt 12 kill_policy: KillPolicy,
    }
}

message! { TaskGroupInfo = "mesos.TaskGroupInfo" { rep 1 tasks: TaskInfo } }

enumeration! {
    OperationState {
        Unsupported = 0 "OPERATION_UNSUPPORTED",
        Pending = 1 "OPERATION_PENDING",
        Finished = 2 "OPERATION_FINISHED",
        Failed = 3 "OPERATION_FAILED",
        Error = 4 "OPERATION_ERROR",
        Dropped = 5 "OPERATION_DROPPED",
        Unreachable = 6 "OPERATION_UNREACHABLE",
        GoneByOperator = 7 "OPERATION_GONE_BY_OPERATOR",
        Recovering = 8 "OPERATION_RECOVERING",
    }
}

message! {
    OperationStatus = "mesos.OperationStatus" {
        opt 1 operation_id: OperationID,
        req 2 state: OperationState,
        opt 3 message: Str,
        opt 6 agent_id: AgentID,
    }
}

enumeration! {
    TaskState {
        Staging = 6 "TASK_STAGING",
        Starting = 0 "TASK_STARTING",
        Running = 1 "TASK_RUNNING",
        Killing = 8 "TASK_KILLING",
        Finished = 2 "TASK_FINISHED",
        Failed = 3 "TASK_FAILED",
        Killed = 4 "TASK_KILLED",
        Error = 7 "TASK_ERROR",
        Lost = 5 "TASK_LOST",
        Dropped = 9 "TASK_DROPPED",
        Unreachable = 10 "TASK_UNREACHABLE",
        Gone = 11 "TASK_GONE",
        GoneByOperator = 12 "TASK_GONE_BY_OPERATOR",
        Unknown = 13 "TASK_UNKNOWN",
    }
}

impl TaskState {
    /// Terminal states: the task is gone and its executor may be too.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Finished
                | TaskState::Failed
                | TaskState::Killed
                | TaskState::Error
                | TaskState::Lost
                | TaskState::Dropped
                | TaskState::Gone
                | TaskState::GoneByOperator
        )
    }
}

message! {
    TaskStatus = "mesos.TaskStatus" {
        req 1 task_id: TaskID,
        req 2 state: TaskState,
        opt 3 data: Bytes,
        opt 4 message: Str,
        opt 5 agent_id: AgentID,
        opt 6 timestamp: f64,
        opt 7 executor_id: ExecutorID,
        opt 8 healthy: bool,
        opt 9 source: task_status::Source,
        opt 10 reason: task_status::Reason,
        opt 11 uuid: Bytes,
        opt 12 labels: Labels,
        opt 14 unreachable_time: TimeInfo,
    }
}

pub mod task_status {
    use crate::enumeration;
    enumeration! {
        Source {
            Master = 0 "SOURCE_MASTER",
            Agent = 1 "SOURCE_AGENT",
            Executor = 2 "SOURCE_EXECUTOR",
        }
    }
    enumeration! {
        Reason {
            CommandExecutorFailed = 0 "REASON_COMMAND_EXECUTOR_FAILED",
            ContainerLaunchFailed = 21 "REASON_CONTAINER_LAUNCH_FAILED",
            ContainerLimitation = 19 "REASON_CONTAINER_LIMITATION",
            ContainerLimitationDisk = 20 "REASON_CONTAINER_LIMITATION_DISK",
            ContainerLimitationMemory = 8 "REASON_CONTAINER_LIMITATION_MEMORY",
            ContainerPreempted = 17 "REASON_CONTAINER_PREEMPTED",
            ContainerUpdateFailed = 22 "REASON_CONTAINER_UPDATE_FAILED",
            ExecutorRegistrationTimeout = 23 "REASON_EXECUTOR_REGISTRATION_TIMEOUT",
            ExecutorReregistrationTimeout = 24 "REASON_EXECUTOR_REREGISTRATION_TIMEOUT",
            ExecutorTerminated = 1 "REASON_EXECUTOR_TERMINATED",
            ExecutorUnregistered = 2 "REASON_EXECUTOR_UNREGISTERED",
            FrameworkRemoved = 3 "REASON_FRAMEWORK_REMOVED",
            GcError = 4 "REASON_GC_ERROR",
            InvalidFrameworkid = 5 "REASON_INVALID_FRAMEWORKID",
            InvalidOffers = 6 "REASON_INVALID_OFFERS",
            IoSwitchboardExited = 27 "REASON_IO_SWITCHBOARD_EXITED",
            MasterDisconnected = 7 "REASON_MASTER_DISCONNECTED",
            Reconciliation = 9 "REASON_RECONCILIATION",
            ResourcesUnknown = 18 "REASON_RESOURCES_UNKNOWN",
            AgentDisconnected = 10 "REASON_AGENT_DISCONNECTED",
            AgentRemoved = 11 "REASON_AGENT_REMOVED",
            AgentReregistered = 32 "REASON_AGENT_REREGISTERED",
            AgentRestarted = 12 "REASON_AGENT_RESTARTED",
            AgentUnknown = 13 "REASON_AGENT_UNKNOWN",
            TaskKilledDuringLaunch = 30 "REASON_TASK_KILLED_DURING_LAUNCH",
            TaskCheckStatusUpdated = 28 "REASON_TASK_CHECK_STATUS_UPDATED",
            TaskHealthCheckStatusUpdated = 29 "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED",
            TaskGroupInvalid = 25 "REASON_TASK_GROUP_INVALID",
            TaskGroupUnauthorized = 26 "REASON_TASK_GROUP_UNAUTHORIZED",
            TaskInvalid = 14 "REASON_TASK_INVALID",
            TaskUnauthorized = 15 "REASON_TASK_UNAUTHORIZED",
            TaskUnknown = 16 "REASON_TASK_UNKNOWN",
        }
    }
}

message! { Filters = "mesos.Filters" { opt 1 refuse_seconds: f64 } }

message! { Environment = "mesos.Environment" { rep 1 variables: environment::Variable } }

pub mod environment {
    use crate::mesos::Str;
    use crate::message;
    message! {
        Variable = "mesos.Environment.Variable" {
            req 1 name: Str,
            opt 2 value: Str,
            opt 3 r#type: variable::Type,
        }
    }
    pub mod variable {
        use crate::enumeration;
        enumeration! { Type { Unknown = 0 "UNKNOWN", Value = 1 "VALUE", Secret = 2 "SECRET" } }
    }
}

message! { Labels = "mesos.Labels" { rep 1 labels: Label } }
message! { Label = "mesos.Label" { req 1 key: Str, opt 2 value: Str } }
