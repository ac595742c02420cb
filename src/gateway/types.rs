//! The gateway's requests and answers as typed structs, with the field names the gateway
//! uses (design section 6). Answers ignore fields they do not name, so a newer gateway
//! that adds fields still decodes; a field the framework acts on (an id, an address, a
//! device path) is required, so a reply without it is an error, not a silent default.
//!
//! Answer types also serialize (with the same names), so that tests can compare the fields
//! they read between a recorded real-shaped answer and the dev gateway's.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

// --- requests --------------------------------------------------------------------------

/// `queryIdByKey` of a protection domain or an SDS: `{"name"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NameKey {
    pub name: String,
}

/// `queryIdByKey` of a storage pool: its name within its protection domain's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolKey {
    pub name: String,
    pub protection_domain_name: String,
}

/// `queryIdByKey` of an SDC: its address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SdcKey {
    pub ip: String,
}

/// `POST /api/types/ProtectionDomain/instances`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewProtectionDomain {
    pub name: String,
}

/// `POST /api/types/StoragePool/instances`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewStoragePool {
    pub name: String,
    pub protection_domain_id: String,
}

/// `POST /api/types/Sds/instances`, optionally with its first devices in the same call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSds {
    pub name: String,
    pub protection_domain_id: String,
    pub sds_ip_list: Vec<SdsIpEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_info_list: Vec<DeviceInfo>,
}

impl NewSds {
    /// An SDS at one address serving every role, without devices.
    pub fn at(name: &str, protection_domain_id: &str, ip: &str) -> NewSds {
        NewSds {
            name: name.to_string(),
            protection_domain_id: protection_domain_id.to_string(),
            sds_ip_list: vec![SdsIpEntry {
                sds_ip: SdsIp {
                    ip: ip.to_string(),
                    role: "all".to_string(),
                },
            }],
            device_info_list: Vec::new(),
        }
    }
}

/// Requests wrap each address in an `SdsIp` object; answers list them flat (`ipList`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SdsIpEntry {
    #[serde(rename = "SdsIp")]
    pub sds_ip: SdsIp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SdsIp {
    pub ip: String,
    #[serde(default)]
    pub role: String,
}

/// A device added with its SDS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceInfo {
    pub device_path: String,
    pub storage_pool_id: String,
}

/// `POST /api/types/Device/instances`. Lower-case `n` in `deviceCurrentPathname` here;
/// answers spell it `deviceCurrentPathName`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewDevice {
    pub device_current_pathname: String,
    pub sds_id: String,
    pub storage_pool_id: String,
}

/// `querySelectedStatistics`: which objects, which properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatisticsQuery {
    pub ids: Vec<String>,
    pub properties: Vec<String>,
}

// --- answers ---------------------------------------------------------------------------

/// The answer of every create call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub id: String,
}

/// An error answer (any status of 400 or above).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub http_status_code: Option<u16>,
    #[serde(default)]
    pub error_code: Option<i64>,
}

/// One storage system (`GET /api/types/System/instances`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct System {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub install_id: Option<String>,
    /// `EMC ScaleIO Version: R2_0.13000.211`: the only place the full build is given.
    #[serde(default)]
    pub system_version_name: Option<String>,
    #[serde(default)]
    pub mdm_cluster: MdmCluster,
}

/// The MDM cluster of a system.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MdmCluster {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub cluster_mode: Option<String>,
    /// `ClusteredNormal`, `ClusteredDegraded`, `NotClustered`.
    #[serde(default)]
    pub cluster_state: Option<String>,
    #[serde(default)]
    pub good_nodes_num: Option<u32>,
    #[serde(default)]
    pub good_replicas_num: Option<u32>,
    /// One object on real gateways; a list is read too.
    #[serde(rename = "master", default, deserialize_with = "one_or_many")]
    pub masters: Vec<MdmMember>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub slaves: Vec<MdmMember>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub tie_breakers: Vec<MdmMember>,
}

/// A member of the MDM cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MdmMember {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub ips: Vec<String>,
    #[serde(rename = "managementIPs", default)]
    pub management_ips: Vec<String>,
    /// `Manager` or `TieBreaker`.
    #[serde(default)]
    pub role: Option<String>,
    /// Absent on the master.
    #[serde(default)]
    pub status: Option<String>,
    /// Patch 0 on real systems: read the build from `System::system_version_name`.
    #[serde(default)]
    pub version_info: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
}

impl MdmMember {
    /// Every address the member answers on (data and management).
    pub fn addresses(&self) -> impl Iterator<Item = &String> {
        self.ips.iter().chain(&self.management_ips)
    }
}

/// Members as one object, a list, or null.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<MdmMember>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shape {
        Many(Vec<MdmMember>),
        One(Box<MdmMember>),
        Null(()),
    }
    Ok(match Shape::deserialize(d)? {
        Shape::Many(list) => list,
        Shape::One(one) => vec![*one],
        Shape::Null(()) => Vec::new(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProtectionDomain {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub system_id: Option<String>,
    #[serde(default)]
    pub protection_domain_state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoragePool {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    pub protection_domain_id: String,
    #[serde(default)]
    pub spare_percentage: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sds {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub protection_domain_id: Option<String>,
    /// Flat in answers, unlike the request's `sdsIpList`.
    #[serde(default)]
    pub ip_list: Vec<SdsIp>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub sds_state: Option<String>,
    #[serde(default)]
    pub membership_state: Option<String>,
    #[serde(default)]
    pub mdm_connection_state: Option<String>,
    /// Only on systems that have SDS maintenance mode.
    #[serde(default)]
    pub maintenance_state: Option<String>,
}

impl Sds {
    pub fn ips(&self) -> impl Iterator<Item = &str> {
        self.ip_list.iter().map(|a| a.ip.as_str())
    }

    /// A joined SDS, connected to the MDMs, at one address (tests).
    #[cfg(test)]
    pub fn joined(id: &str, ip: &str) -> Sds {
        Sds {
            id: id.into(),
            name: None,
            protection_domain_id: Some("pd".into()),
            ip_list: vec![SdsIp {
                ip: ip.into(),
                role: "all".into(),
            }],
            port: None,
            sds_state: Some("Normal".into()),
            membership_state: Some("Joined".into()),
            mdm_connection_state: Some("Connected".into()),
            maintenance_state: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub id: String,
    /// Usually null: devices are known by their path.
    #[serde(default)]
    pub name: Option<String>,
    pub device_current_path_name: String,
    #[serde(default)]
    pub storage_pool_id: Option<String>,
    #[serde(default)]
    pub sds_id: Option<String>,
    #[serde(default)]
    pub device_state: Option<String>,
    #[serde(default)]
    pub error_state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sdc {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    pub sdc_ip: String,
    #[serde(default)]
    pub sdc_guid: Option<String>,
    /// `Connected` or `Disconnected`.
    #[serde(default)]
    pub mdm_connection_state: Option<String>,
    #[serde(default)]
    pub version_info: Option<String>,
}

impl Sdc {
    /// An SDC at `ip` in MDM connection state `state` (tests).
    #[cfg(test)]
    pub fn at(ip: &str, state: &str) -> Sdc {
        Sdc {
            id: format!("sdc-{ip}"),
            name: None,
            sdc_ip: ip.into(),
            sdc_guid: None,
            mdm_connection_state: Some(state.into()),
            version_info: None,
        }
    }

    /// The SDC talks to the MDMs (it can map volumes).
    pub fn connected(&self) -> bool {
        self.mdm_connection_state.as_deref() == Some("Connected")
    }
}

/// A storage pool's capacity figures, in KiB. A property the gateway leaves out reads 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PoolStatistics {
    pub max_capacity_in_kb: u64,
    pub capacity_in_use_in_kb: u64,
    pub spare_capacity_in_kb: u64,
    pub capacity_available_for_volume_allocation_in_kb: u64,
    /// Data with one copy missing, the other readable.
    pub degraded_healthy_capacity_in_kb: u64,
    /// Data with one copy missing and the other on a failed device.
    pub degraded_failed_capacity_in_kb: u64,
    /// Data with no readable copy.
    pub failed_capacity_in_kb: u64,
    pub in_maintenance_capacity_in_kb: u64,
    pub pending_fwd_rebuild_capacity_in_kb: u64,
    pub pending_bck_rebuild_capacity_in_kb: u64,
    pub pending_rebalance_capacity_in_kb: u64,
    /// Being rebuilt or rebalanced now.
    pub moving_capacity_in_kb: u64,
}

impl PoolStatistics {
    /// The properties to ask `querySelectedStatistics` for: the fields above.
    pub const PROPERTIES: [&'static str; 12] = [
        "maxCapacityInKb",
        "capacityInUseInKb",
        "spareCapacityInKb",
        "capacityAvailableForVolumeAllocationInKb",
        "degradedHealthyCapacityInKb",
        "degradedFailedCapacityInKb",
        "failedCapacityInKb",
        "inMaintenanceCapacityInKb",
        "pendingFwdRebuildCapacityInKb",
        "pendingBckRebuildCapacityInKb",
        "pendingRebalanceCapacityInKb",
        "movingCapacityInKb",
    ];
}

/// The answer of `querySelectedStatistics`: object id -> its figures.
pub type StatisticsById = BTreeMap<String, PoolStatistics>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_use_the_gateways_field_names() {
        let mut sds = NewSds::at("h1", "pd1", "10.0.0.5");
        assert_eq!(
            serde_json::to_value(&sds).unwrap(),
            json!({"name": "h1", "protectionDomainId": "pd1",
                "sdsIpList": [{"SdsIp": {"ip": "10.0.0.5", "role": "all"}}]})
        );
        sds.device_info_list.push(DeviceInfo {
            device_path: "/dev/sdb".into(),
            storage_pool_id: "p1".into(),
        });
        assert_eq!(
            serde_json::to_value(&sds).unwrap()["deviceInfoList"],
            json!([{"devicePath": "/dev/sdb", "storagePoolId": "p1"}])
        );
        let device = NewDevice {
            device_current_pathname: "/dev/sdb".into(),
            sds_id: "s1".into(),
            storage_pool_id: "p1".into(),
        };
        assert_eq!(
            serde_json::to_value(&device).unwrap(),
            json!({"deviceCurrentPathname": "/dev/sdb", "sdsId": "s1", "storagePoolId": "p1"})
        );
        let key = PoolKey {
            name: "sp".into(),
            protection_domain_name: "pd".into(),
        };
        assert_eq!(
            serde_json::to_value(&key).unwrap(),
            json!({"name": "sp", "protectionDomainName": "pd"})
        );
    }

    #[test]
    fn the_statistics_properties_are_the_fields_read() {
        let stats = serde_json::to_value(PoolStatistics::default()).unwrap();
        let mut fields: Vec<&str> = stats
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        fields.sort();
        let mut asked = PoolStatistics::PROPERTIES.to_vec();
        asked.sort();
        assert_eq!(fields, asked);
    }

    #[test]
    fn mdm_members_come_as_one_object_a_list_or_null() {
        let one: MdmCluster =
            serde_json::from_value(json!({"master": {"ips": ["10.0.0.11"]}, "slaves": null}))
                .unwrap();
        assert_eq!(one.masters.len(), 1);
        assert!(one.slaves.is_empty() && one.tie_breakers.is_empty());
        let many: MdmCluster =
            serde_json::from_value(json!({"master": [{"ips": ["a"]}, {"managementIPs": ["b"]}]}))
                .unwrap();
        let all: Vec<&String> = many.masters.iter().flat_map(MdmMember::addresses).collect();
        assert_eq!(all, ["a", "b"]);
    }
}
