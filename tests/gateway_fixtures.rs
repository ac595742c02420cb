//! Real-shaped gateway answers (`tests/fixtures/gateway/*.json`, field names as design
//! section 6 gives them) decode with the typed API into what the framework reads.
//! `tests/gateway_client.rs` checks that the dev gateway's answers to the same calls carry
//! the same fields, so that the client and the simulator cannot drift apart.

use serde_json::Value;
use storage_framework::gateway::api::{decode, decode_list};
use storage_framework::gateway::types::{
    Created, Device, ErrorBody, ProtectionDomain, Sdc, Sds, StatisticsById, StoragePool, System,
};

fn fixture_text(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gateway")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> Value {
    serde_json::from_str(&fixture_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_system_with_its_mdm_cluster() {
    let systems: Vec<System> = decode_list(
        "list systems",
        "fixture",
        fixture_text("systems.json").as_bytes(),
    )
    .expect("systems");
    let [s] = systems.as_slice() else {
        panic!("{systems:?}")
    };
    assert_eq!(s.id, "2d5b0c8b2e8c79a1");
    assert_eq!(s.name.as_deref(), Some("scaleio"));
    assert_eq!(
        s.system_version_name.as_deref(),
        Some("EMC ScaleIO Version: R2_0.13000.211")
    );
    let c = &s.mdm_cluster;
    assert_eq!(c.cluster_state.as_deref(), Some("ClusteredNormal"));
    assert_eq!((c.good_nodes_num, c.good_replicas_num), (Some(3), Some(2)));
    assert_eq!(c.masters.len(), 1, "one master object");
    assert_eq!(c.masters[0].ips, ["10.0.0.11"]);
    assert_eq!(c.masters[0].status, None, "the master carries no status");
    assert_eq!(c.slaves[0].management_ips, ["10.0.0.12"]);
    assert_eq!(c.slaves[0].status.as_deref(), Some("Normal"));
    assert_eq!(c.tie_breakers[0].role.as_deref(), Some("TieBreaker"));
    assert_eq!(c.tie_breakers[0].port, Some(9011));
}

#[test]
fn domains_pools_sdss_devices_and_sdcs() {
    let pds: Vec<ProtectionDomain> = decode_list(
        "list protection domains",
        "fixture",
        fixture_text("protection_domains.json").as_bytes(),
    )
    .expect("pds");
    assert_eq!(pds[0].name.as_deref(), Some("default"));
    let pools: Vec<StoragePool> = decode_list(
        "list storage pools",
        "fixture",
        fixture_text("storage_pools.json").as_bytes(),
    )
    .expect("pools");
    assert_eq!(pools[0].protection_domain_id, pds[0].id);

    let sds: Sds = decode("get SDS", "fixture", fixture("sds.json")).expect("sds");
    assert_eq!(
        sds.ips().collect::<Vec<_>>(),
        ["10.0.0.21"],
        "ipList is flat"
    );
    assert_eq!(sds.mdm_connection_state.as_deref(), Some("Connected"));
    let sdss: Vec<Sds> =
        decode_list("list SDSs", "fixture", fixture_text("sdss.json").as_bytes()).expect("sdss");
    assert_eq!(sdss, std::slice::from_ref(&sds));

    let devices: Vec<Device> = decode_list(
        "list SDS devices",
        "fixture",
        fixture_text("devices.json").as_bytes(),
    )
    .expect("devices");
    assert_eq!(devices[0].device_current_path_name, "/dev/sdb");
    assert_eq!(devices[0].name, None, "unnamed devices answer null");
    assert_eq!(devices[0].sds_id.as_deref(), Some(sds.id.as_str()));

    let sdcs: Vec<Sdc> =
        decode_list("list SDCs", "fixture", fixture_text("sdcs.json").as_bytes()).expect("sdcs");
    assert_eq!(sdcs[0].sdc_ip, "10.0.0.21");
    assert!(sdcs[0].connected());
}

#[test]
fn statistics_created_ids_and_errors() {
    let stats: StatisticsById = decode(
        "query pool statistics",
        "fixture",
        fixture("pool_statistics.json"),
    )
    .expect("stats");
    let pool = &stats["a21c3a3d00000000"];
    assert_eq!(pool.max_capacity_in_kb, 419_430_400);
    assert_eq!(pool.capacity_in_use_in_kb, 52_428_800);
    assert_eq!(pool.spare_capacity_in_kb, 41_943_040);
    assert_eq!(
        pool.capacity_available_for_volume_allocation_in_kb,
        167_772_160
    );

    let created: Created = decode("create SDS", "fixture", fixture("created.json")).expect("id");
    assert_eq!(created.id, "e3ce4a6a00000000");
    let id: String = decode("query SDS id", "fixture", fixture("query_id.json")).expect("id");
    assert_eq!(id, "d1ad4c0e00000000");
    let version: String = decode("version", "fixture", fixture("version.json")).expect("v");
    assert_eq!(version, "2.0");

    let e: ErrorBody = decode("any", "fixture", fixture("error.json")).expect("error");
    assert_eq!(e.error_code, Some(3));
    assert_eq!(e.http_status_code, Some(500));
    assert!(e.message.is_some_and(|m| !m.is_empty()));
}

#[test]
fn a_fixture_that_loses_a_field_the_framework_reads_is_an_error_naming_it() {
    let mut sdcs = fixture("sdcs.json");
    sdcs[0].as_object_mut().unwrap().remove("sdcIp");
    let e = decode_list::<Sdc>(
        "list SDCs",
        "/api/types/Sdc/instances",
        sdcs.to_string().as_bytes(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("list SDCs") && text.contains("sdcIp") && text.contains("item 0"),
        "{text}"
    );
}
