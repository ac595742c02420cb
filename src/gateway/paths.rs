//! Every resource path of the gateway's REST API the framework uses, built here and nowhere
//! else (design section 6).

/// The object types the framework reads or creates, as the gateway names them in paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    System,
    ProtectionDomain,
    StoragePool,
    Sds,
    Sdc,
    Device,
}

impl ObjectType {
    pub fn name(self) -> &'static str {
        match self {
            ObjectType::System => "System",
            ObjectType::ProtectionDomain => "ProtectionDomain",
            ObjectType::StoragePool => "StoragePool",
            ObjectType::Sds => "Sds",
            ObjectType::Sdc => "Sdc",
            ObjectType::Device => "Device",
        }
    }
}

/// `GET` with Basic `admin:<password>`: a token.
pub const LOGIN: &str = "/api/login";

/// `GET`: the API version, a JSON string.
pub const VERSION: &str = "/api/version";

/// Every object of a type (`GET`), or a new one (`POST`).
pub fn instances(t: ObjectType) -> String {
    format!("/api/types/{}/instances", t.name())
}

/// An action on a type (`queryIdByKey`, `querySelectedStatistics`).
pub fn type_action(t: ObjectType, action: &str) -> String {
    format!("/api/types/{}/instances/action/{action}", t.name())
}

/// One object.
pub fn instance(t: ObjectType, id: &str) -> String {
    format!("/api/instances/{}::{id}", t.name())
}

/// An action on one object (`removeSds`, `removeDevice`).
pub fn instance_action(t: ObjectType, id: &str, action: &str) -> String {
    format!("{}/action/{action}", instance(t, id))
}

/// The objects of type `related` that belong to one object.
pub fn relationship(t: ObjectType, id: &str, related: ObjectType) -> String {
    format!("{}/relationships/{}", instance(t, id), related.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_gateways_scheme() {
        assert_eq!(instances(ObjectType::Sds), "/api/types/Sds/instances");
        assert_eq!(
            type_action(ObjectType::StoragePool, "queryIdByKey"),
            "/api/types/StoragePool/instances/action/queryIdByKey"
        );
        assert_eq!(
            instance(ObjectType::Sds, "ab12"),
            "/api/instances/Sds::ab12"
        );
        assert_eq!(
            instance_action(ObjectType::Device, "d1", "removeDevice"),
            "/api/instances/Device::d1/action/removeDevice"
        );
        assert_eq!(
            relationship(ObjectType::Sds, "ab12", ObjectType::Device),
            "/api/instances/Sds::ab12/relationships/Device"
        );
    }
}
