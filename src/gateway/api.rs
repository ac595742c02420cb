//! One typed function per gateway call the framework makes: a typed request in, a typed
//! answer out, the path from [`paths`]. The [`GatewayClient`] beneath carries the transport
//! (login, token, retries, TLS, counters); nothing above this module sees a path or a JSON
//! value.
//!
//! A reply that does not have the answer's shape is a [`GatewayError::BadReply`] that names
//! the call, the path and what did not fit.

use super::client::TakeError;
use super::client::{code, GatewayClient, GatewayError};
use super::listing::{self, ListError};
use super::paths::{self, ObjectType};
use super::types::{
    Created, Device, NameKey, NewDevice, NewProtectionDomain, NewSds, NewStoragePool, PoolKey,
    PoolStatistics, ProtectionDomain, Sdc, SdcKey, Sds, StatisticsById, StatisticsQuery,
    StoragePool, System,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Read;

/// `GET /api/version`: the gateway's API version (`"2.0"`).
pub fn version(c: &mut GatewayClient) -> Result<String, GatewayError> {
    let call = "version";
    let reply = c.get(call, paths::VERSION)?;
    decode(call, paths::VERSION, reply)
}

/// Whether the gateway answers at all: one `GET /api/version`, sent once, without a login.
/// Any status counts (a 401 is an answer); only a transport error is returned.
pub fn probe(c: &mut GatewayClient) -> Result<u16, GatewayError> {
    c.answers("probe", paths::VERSION)
}

/// Every storage system the gateway manages (usually one).
pub fn systems(c: &mut GatewayClient) -> Result<Vec<System>, GatewayError> {
    list(c, "list systems", ObjectType::System)
}

pub fn protection_domains(c: &mut GatewayClient) -> Result<Vec<ProtectionDomain>, GatewayError> {
    list(c, "list protection domains", ObjectType::ProtectionDomain)
}

pub fn storage_pools(c: &mut GatewayClient) -> Result<Vec<StoragePool>, GatewayError> {
    list(c, "list storage pools", ObjectType::StoragePool)
}

pub fn sdss(c: &mut GatewayClient) -> Result<Vec<Sds>, GatewayError> {
    list(c, "list SDSs", ObjectType::Sds)
}

pub fn sdcs(c: &mut GatewayClient) -> Result<Vec<Sdc>, GatewayError> {
    list(c, "list SDCs", ObjectType::Sdc)
}

/// The addresses of the SDCs connected to the MDMs, kept as the listing streams: the worker
/// checks its nodes awaiting their SDC against every SDC of the cluster, and needs no more of
/// them than this.
pub fn connected_sdc_ips(c: &mut GatewayClient) -> Result<BTreeSet<String>, GatewayError> {
    let mut connected = BTreeSet::new();
    each_sdc(c, &mut |sdc| match sdc {
        Some(sdc) if sdc.connected() => {
            connected.insert(sdc.sdc_ip);
        }
        Some(_) => {}
        None => connected.clear(),
    })?;
    Ok(connected)
}

/// Every SDS, handed to `take` one by one as the listing streams (a health poll keeps only
/// what the model keeps of each). `take(None)` comes before each attempt's first item: a
/// body cut off half-way is asked for again, and what was handed over before is to be
/// forgotten.
pub fn each_sds(
    c: &mut GatewayClient,
    take: &mut dyn FnMut(Option<Sds>),
) -> Result<(), GatewayError> {
    each(c, "list SDSs", ObjectType::Sds, take)
}

/// Every device, as [`each_sds`].
pub fn each_device(
    c: &mut GatewayClient,
    take: &mut dyn FnMut(Option<Device>),
) -> Result<(), GatewayError> {
    each(c, "list devices", ObjectType::Device, take)
}

/// Every SDC, as [`each_sds`].
pub fn each_sdc(
    c: &mut GatewayClient,
    take: &mut dyn FnMut(Option<Sdc>),
) -> Result<(), GatewayError> {
    each(c, "list SDCs", ObjectType::Sdc, take)
}

fn each<T: DeserializeOwned>(
    c: &mut GatewayClient,
    call: &'static str,
    t: ObjectType,
    take: &mut dyn FnMut(Option<T>),
) -> Result<(), GatewayError> {
    let path = paths::instances(t);
    c.get_taking(call, &path, &mut |body| {
        take(None);
        each_item(body, &mut |item| take(Some(item)))
    })
}

pub fn devices(c: &mut GatewayClient) -> Result<Vec<Device>, GatewayError> {
    list(c, "list devices", ObjectType::Device)
}

/// One SDS by id.
pub fn sds(c: &mut GatewayClient, id: &str) -> Result<Sds, GatewayError> {
    let call = "get SDS";
    let path = paths::instance(ObjectType::Sds, id);
    let reply = c.get(call, &path)?;
    decode(call, &path, reply)
}

/// The devices of one SDS.
pub fn sds_devices(c: &mut GatewayClient, sds_id: &str) -> Result<Vec<Device>, GatewayError> {
    let call = "list SDS devices";
    let path = paths::relationship(ObjectType::Sds, sds_id, ObjectType::Device);
    c.get_taking(call, &path, &mut |body| items(body))
}

/// `queryIdByKey` of a protection domain by name; `None` when there is none.
pub fn protection_domain_id(
    c: &mut GatewayClient,
    name: &str,
) -> Result<Option<String>, GatewayError> {
    let key = NameKey {
        name: name.to_string(),
    };
    query_id(
        c,
        "query protection domain id",
        ObjectType::ProtectionDomain,
        &key,
    )
}

/// `queryIdByKey` of a storage pool by its name and its protection domain's.
pub fn storage_pool_id(
    c: &mut GatewayClient,
    protection_domain: &str,
    name: &str,
) -> Result<Option<String>, GatewayError> {
    let key = PoolKey {
        name: name.to_string(),
        protection_domain_name: protection_domain.to_string(),
    };
    query_id(c, "query storage pool id", ObjectType::StoragePool, &key)
}

/// `queryIdByKey` of an SDS by name.
pub fn sds_id(c: &mut GatewayClient, name: &str) -> Result<Option<String>, GatewayError> {
    let key = NameKey {
        name: name.to_string(),
    };
    query_id(c, "query SDS id", ObjectType::Sds, &key)
}

/// `queryIdByKey` of an SDC by its address.
pub fn sdc_id(c: &mut GatewayClient, ip: &str) -> Result<Option<String>, GatewayError> {
    let key = SdcKey { ip: ip.to_string() };
    query_id(c, "query SDC id", ObjectType::Sdc, &key)
}

/// The new domain's id; errorCode 141 when the name is taken.
pub fn create_protection_domain(
    c: &mut GatewayClient,
    request: &NewProtectionDomain,
) -> Result<String, GatewayError> {
    create(
        c,
        "create protection domain",
        ObjectType::ProtectionDomain,
        request,
    )
}

/// The new pool's id; errorCode 173 when the name is taken in its domain.
pub fn create_storage_pool(
    c: &mut GatewayClient,
    request: &NewStoragePool,
) -> Result<String, GatewayError> {
    create(c, "create storage pool", ObjectType::StoragePool, request)
}

/// The new SDS's id; errorCode 98 (name) or 93 (address) when taken.
pub fn create_sds(c: &mut GatewayClient, request: &NewSds) -> Result<String, GatewayError> {
    create(c, "create SDS", ObjectType::Sds, request)
}

/// The new device's id; errorCode 206 when the SDS has it already.
pub fn create_device(c: &mut GatewayClient, request: &NewDevice) -> Result<String, GatewayError> {
    create(c, "create device", ObjectType::Device, request)
}

/// What a removal call started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Accepted now, or under way already: the object stays listed until its data moved.
    Started,
    /// The gateway has no such object (removed before).
    Gone,
}

/// `removeSds`: the SDS's data moves to the other SDSs of its domain (rebuilt from the other
/// copies when it is down); it stays listed (`sdsState` `RemovePending`) until then.
/// errorCode 212 (the dev gateway's) when the others could not hold its data.
pub fn remove_sds(c: &mut GatewayClient, id: &str) -> Result<Removal, GatewayError> {
    remove(c, "remove SDS", ObjectType::Sds, id, "removeSds")
}

/// `removeDevice`: as [`remove_sds`], for one device.
pub fn remove_device(c: &mut GatewayClient, id: &str) -> Result<Removal, GatewayError> {
    remove(c, "remove device", ObjectType::Device, id, "removeDevice")
}

fn remove(
    c: &mut GatewayClient,
    call: &'static str,
    t: ObjectType,
    id: &str,
    action: &str,
) -> Result<Removal, GatewayError> {
    let path = paths::instance_action(t, id, action);
    // The answer's body carries nothing (often empty): the status says it all.
    match c.post(call, &path, &Value::Object(Default::default())) {
        Ok(_) => Ok(Removal::Started),
        Err(e) if e.error_code() == Some(code::REMOVE_IN_PROGRESS) => Ok(Removal::Started),
        Err(e)
            if matches!(
                e.error_code(),
                Some(code::NOT_FOUND | code::SDS_NOT_FOUND | code::DEVICE_NOT_FOUND)
            ) =>
        {
            Ok(Removal::Gone)
        }
        Err(e) => Err(e),
    }
}

/// Capacity figures of these pools, in one `querySelectedStatistics` call (none for no ids).
pub fn pool_statistics(
    c: &mut GatewayClient,
    pool_ids: &[String],
) -> Result<StatisticsById, GatewayError> {
    if pool_ids.is_empty() {
        return Ok(StatisticsById::new());
    }
    let call = "query pool statistics";
    let path = paths::type_action(ObjectType::StoragePool, "querySelectedStatistics");
    let query = StatisticsQuery {
        ids: pool_ids.to_vec(),
        properties: PoolStatistics::PROPERTIES.map(str::to_string).to_vec(),
    };
    let reply = c.post(call, &path, &encode(call, &query)?)?;
    decode(call, &path, reply)
}

fn list<T: DeserializeOwned>(
    c: &mut GatewayClient,
    call: &'static str,
    t: ObjectType,
) -> Result<Vec<T>, GatewayError> {
    let path = paths::instances(t);
    c.get_taking(call, &path, &mut |body| items(body))
}

/// A quoted id, or `None` on errorCode 3 (not found).
fn query_id(
    c: &mut GatewayClient,
    call: &'static str,
    t: ObjectType,
    key: &impl Serialize,
) -> Result<Option<String>, GatewayError> {
    let path = paths::type_action(t, "queryIdByKey");
    match c.post(call, &path, &encode(call, key)?) {
        Ok(Value::String(id)) if !id.is_empty() => Ok(Some(id)),
        Ok(other) => Err(bad(
            call,
            &path,
            format!("expected a quoted id, got {}", kind(&other)),
        )),
        Err(e) if e.error_code() == Some(code::NOT_FOUND) => Ok(None),
        Err(e) => Err(e),
    }
}

fn create(
    c: &mut GatewayClient,
    call: &'static str,
    t: ObjectType,
    request: &impl Serialize,
) -> Result<String, GatewayError> {
    let path = paths::instances(t);
    let reply = c.post(call, &path, &encode(call, request)?)?;
    let created: Created = decode(call, &path, reply)?;
    if created.id.is_empty() {
        return Err(bad(call, &path, "the new object's id is empty".into()));
    }
    Ok(created.id)
}

fn encode(call: &'static str, request: &impl Serialize) -> Result<Value, GatewayError> {
    serde_json::to_value(request).map_err(|e| GatewayError::Encode {
        call,
        detail: e.to_string(),
    })
}

/// The answer of `call`, or an error that says what did not fit.
pub fn decode<T: DeserializeOwned>(
    call: &'static str,
    path: &str,
    reply: Value,
) -> Result<T, GatewayError> {
    let got = kind(&reply);
    serde_json::from_value(reply).map_err(|e| bad(call, path, format!("{e} (got {got})")))
}

/// A list answer read from `body`, item by item, so that an error names the item that did
/// not fit.
pub fn decode_list<T: DeserializeOwned>(
    call: &'static str,
    path: &str,
    mut body: impl Read,
) -> Result<Vec<T>, GatewayError> {
    items(&mut body).map_err(|e| match e {
        TakeError::Bad(detail) => bad(call, path, detail),
        TakeError::Io(e) => bad(call, path, format!("cannot read it: {e}")),
    })
}

/// A listing taken as it arrives: each item's text is held only until it is typed, and
/// neither the whole text nor a JSON tree of it ever is ([`listing`]).
fn items<T: DeserializeOwned>(body: &mut dyn Read) -> Result<Vec<T>, TakeError> {
    let mut items = Vec::new();
    each_item(body, &mut |item| items.push(item))?;
    Ok(items)
}

/// Types each item of the JSON list read from `body` and hands it to `take`: one reader for
/// every type of item. An item that does not fit is named by its place and id.
fn each_item<T: DeserializeOwned>(
    body: &mut dyn Read,
    take: &mut dyn FnMut(T),
) -> Result<(), TakeError> {
    let read = listing::each_item(body, &mut |place, text| match serde_json::from_str(text) {
        Ok(item) => {
            take(item);
            Ok(())
        }
        Err(e) => {
            let id = serde_json::from_str::<Id>(text).ok().and_then(|i| i.id);
            let which = id.map(|id| format!(" (id {id})")).unwrap_or_default();
            Err(format!("item {place}{which}: {e}"))
        }
    });
    read.map_err(|e| match e {
        ListError::Bad(detail) => TakeError::Bad(detail),
        ListError::Io(e) => TakeError::Io(e),
    })
}

/// Only an item's id, to name an item that did not fit.
#[derive(Deserialize)]
struct Id {
    id: Option<String>,
}

fn bad(call: &'static str, path: &str, detail: String) -> GatewayError {
    GatewayError::BadReply {
        call,
        path: path.to_string(),
        detail,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_of_the_wrong_shape_names_the_call_and_the_misfit() {
        let e = decode_list::<Sdc>(
            "list SDCs",
            "/api/types/Sdc/instances",
            json!([{"id": "c1", "sdcIp": "10.0.0.5"}, {"id": "c2"}])
                .to_string()
                .as_bytes(),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            GatewayError::BadReply {
                call: "list SDCs",
                ..
            }
        ));
        let text = e.to_string();
        assert!(
            text.contains("list SDCs") && text.contains("item 1 (id c2)") && text.contains("sdcIp"),
            "{text}"
        );
        let e = decode_list::<Sdc>("list SDCs", "/p", &br#"{"id": "c1"}"#[..]).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected a JSON list, got an object"),
            "{e}"
        );
        let e = decode::<String>("version", "/api/version", json!(2.0)).unwrap_err();
        assert!(e.to_string().contains("got a number"), "{e}");
    }
}
