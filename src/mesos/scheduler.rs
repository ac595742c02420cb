//! The v1 scheduler API (`mesos.scheduler` package): the `Call`s a framework sends to
//! `/api/v1/scheduler` and the `Event`s the master streams back.

use crate::mesos::types::{
    offer, AgentID, ExecutorID, Filters, FrameworkID, FrameworkInfo, InverseOffer, KillPolicy,
    MasterInfo, Offer, OfferID, OperationStatus, Request, TaskID, TaskStatus,
};
use crate::mesos::{Bytes, Str};
use crate::message;

message! {
    Event = "mesos.scheduler.Event" {
        opt 1 r#type: event::Type,
        opt 2 subscribed: event::Subscribed,
        opt 3 offers: event::Offers,
        opt 4 rescind: event::Rescind,
        opt 9 inverse_offers: event::InverseOffers,
        opt 10 rescind_inverse_offer: event::RescindInverseOffer,
        opt 5 update: event::Update,
        opt 11 update_operation_status: event::UpdateOperationStatus,
        opt 6 message: event::Message,
        opt 7 failure: event::Failure,
        opt 8 error: event::Error,
    }
}

pub mod event {
    use super::*;
    use crate::enumeration;

    enumeration! {
        Type {
            Unknown = 0 "UNKNOWN",
            Subscribed = 1 "SUBSCRIBED",
            Offers = 2 "OFFERS",
            InverseOffers = 9 "INVERSE_OFFERS",
            Rescind = 3 "RESCIND",
            RescindInverseOffer = 10 "RESCIND_INVERSE_OFFER",
            Update = 4 "UPDATE",
            UpdateOperationStatus = 11 "UPDATE_OPERATION_STATUS",
            Message = 5 "MESSAGE",
            Failure = 6 "FAILURE",
            Error = 7 "ERROR",
            Heartbeat = 8 "HEARTBEAT",
        }
    }

    message! {
        Subscribed = "mesos.scheduler.Event.Subscribed" {
            req 1 framework_id: FrameworkID,
            opt 2 heartbeat_interval_seconds: f64,
            opt 3 master_info: MasterInfo,
        }
    }
    message! { Offers = "mesos.scheduler.Event.Offers" { rep 1 offers: Offer } }
    message! { Rescind = "mesos.scheduler.Event.Rescind" { req 1 offer_id: OfferID } }
    message! {
        InverseOffers = "mesos.scheduler.Event.InverseOffers" {
            rep 1 inverse_offers: InverseOffer,
        }
    }
    message! {
        RescindInverseOffer = "mesos.scheduler.Event.RescindInverseOffer" {
            req 1 inverse_offer_id: OfferID,
        }
    }
    message! { Update = "mesos.scheduler.Event.Update" { req 1 status: TaskStatus } }
    message! {
        UpdateOperationStatus = "mesos.scheduler.Event.UpdateOperationStatus" {
            req 1 status: OperationStatus,
        }
    }
    message! {
        Message = "mesos.scheduler.Event.Message" {
            req 1 agent_id: AgentID,
            req 2 executor_id: ExecutorID,
            req 3 data: Bytes,
        }
    }
    message! {
        Failure = "mesos.scheduler.Event.Failure" {
            opt 1 agent_id: AgentID,
            opt 2 executor_id: ExecutorID,
            opt 3 status: i32,
        }
    }
    message! { Error = "mesos.scheduler.Event.Error" { req 1 message: Str } }
}

message! {
    Call = "mesos.scheduler.Call" {
        opt 1 framework_id: FrameworkID,
        opt 2 r#type: call::Type,
        opt 3 subscribe: call::Subscribe,
        opt 4 accept: call::Accept,
        opt 5 decline: call::Decline,
        opt 6 kill: call::Kill,
        opt 7 shutdown: call::Shutdown,
        opt 8 acknowledge: call::Acknowledge,
        opt 9 reconcile: call::Reconcile,
        opt 10 message: call::Message,
        opt 11 request: call::Request,
        opt 13 accept_inverse_offers: call::AcceptInverseOffers,
        opt 14 decline_inverse_offers: call::DeclineInverseOffers,
        opt 15 revive: call::Revive,
        opt 16 suppress: call::Suppress,
    }
}

pub mod call {
    use super::*;
    use crate::enumeration;

    enumeration! {
        Type {
            Unknown = 0 "UNKNOWN",
            Subscribe = 1 "SUBSCRIBE",
            Teardown = 2 "TEARDOWN",
            Accept = 3 "ACCEPT",
            Decline = 4 "DECLINE",
            AcceptInverseOffers = 13 "ACCEPT_INVERSE_OFFERS",
            DeclineInverseOffers = 14 "DECLINE_INVERSE_OFFERS",
            Revive = 5 "REVIVE",
            Kill = 6 "KILL",
            Shutdown = 7 "SHUTDOWN",
            Acknowledge = 8 "ACKNOWLEDGE",
            Reconcile = 9 "RECONCILE",
            Message = 10 "MESSAGE",
            Request = 11 "REQUEST",
            Suppress = 12 "SUPPRESS",
        }
    }

    message! {
        Subscribe = "mesos.scheduler.Call.Subscribe" {
            req 1 framework_info: FrameworkInfo,
            rep 2 suppressed_roles: Str,
        }
    }
    message! {
        Accept = "mesos.scheduler.Call.Accept" {
            rep 1 offer_ids: OfferID,
            rep 2 operations: offer::Operation,
            opt 3 filters: Filters,
        }
    }
    message! {
        Decline = "mesos.scheduler.Call.Decline" {
            rep 1 offer_ids: OfferID,
            opt 2 filters: Filters,
        }
    }
    message! {
        AcceptInverseOffers = "mesos.scheduler.Call.AcceptInverseOffers" {
            rep 1 inverse_offer_ids: OfferID,
            opt 2 filters: Filters,
        }
    }
    message! {
        DeclineInverseOffers = "mesos.scheduler.Call.DeclineInverseOffers" {
            rep 1 inverse_offer_ids: OfferID,
            opt 2 filters: Filters,
        }
    }
    message! { Revive = "mesos.scheduler.Call.Revive" { rep 1 roles: Str } }
    message! {
        Kill = "mesos.scheduler.Call.Kill" {
            req 1 task_id: TaskID,
            opt 2 agent_id: AgentID,
            opt 3 kill_policy: KillPolicy,
        }
    }
    message! {
        Shutdown = "mesos.scheduler.Call.Shutdown" {
            req 1 executor_id: ExecutorID,
            req 2 agent_id: AgentID,
        }
    }
    message! {
        Acknowledge = "mesos.scheduler.Call.Acknowledge" {
            req 1 agent_id: AgentID,
            req 2 task_id: TaskID,
            req 3 uuid: Bytes,
        }
    }
    message! { Reconcile = "mesos.scheduler.Call.Reconcile" { rep 1 tasks: reconcile::Task } }
    pub mod reconcile {
        use super::*;
        message! {
            Task = "mesos.scheduler.Call.Reconcile.Task" {
                req 1 task_id: TaskID,
                opt 2 agent_id: AgentID,
            }
        }
    }
    message! {
        Message = "mesos.scheduler.Call.Message" {
            req 1 agent_id: AgentID,
            req 2 executor_id: ExecutorID,
            req 3 data: Bytes,
        }
    }
    message! { Request = "mesos.scheduler.Call.Request" { rep 1 requests: super::Request } }
    message! { Suppress = "mesos.scheduler.Call.Suppress" { rep 1 roles: Str } }
}
