//! The resource arithmetic the master needs: unreserved cpus, mem, disk and port ranges, and
//! cpus and mem statically reserved for one role (`--resources="cpus(storage):2"`), which
//! only frameworks of that role are offered and which a task uses only by naming that role
//! in its resources, as on a real agent. Dynamic reservations (`Resource.reservation`,
//! RESERVE operations) are not modelled: such entries count as foreign.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};
use storage_framework::mesos::types::{resource, value, Resource};

/// Scalars are compared with Mesos' fixed-point precision (three decimals).
const EPSILON: f64 = 0.0005;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Res {
    pub cpus: f64,
    pub mem: f64,
    pub disk: f64,
    /// Sorted, disjoint, inclusive ranges.
    pub ports: Vec<(u64, u64)>,
    /// Names of resources no agent here has (custom or dynamically reserved ones): a set
    /// holding any is never contained in an offer.
    pub foreign: Vec<String>,
    /// Statically reserved cpus and mem, and the role they are reserved for.
    pub reserved: Option<Reserved>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    pub role: String,
    pub cpus: f64,
    pub mem: f64,
}

impl Res {
    pub fn new(cpus: f64, mem: f64, disk: f64, ports: Vec<(u64, u64)>) -> Res {
        Res {
            cpus,
            mem,
            disk,
            ports: normalize(ports),
            foreign: Vec::new(),
            reserved: None,
        }
    }

    /// The same with `cpus` and `mem` reserved for `role` besides.
    pub fn with_reserved(mut self, role: &str, cpus: f64, mem: f64) -> Res {
        self.reserved = Some(Reserved {
            role: role.to_string(),
            cpus,
            mem,
        });
        self
    }

    /// Takes what a framework of `role` is offered: everything unreserved, and the
    /// reservation if it is that role's; a reservation for another role stays.
    pub fn take_for(&mut self, role: &str) -> Res {
        let (give, keep) = match self.reserved.take() {
            Some(r) if r.role == role => (Some(r), None),
            other => (None, other),
        };
        let mut taken = std::mem::take(self);
        taken.reserved = give;
        self.reserved = keep;
        taken
    }

    /// Reads a resource list; malformed entries are an error naming the resource.
    pub fn from_proto(list: &[Resource]) -> Result<Res, String> {
        let mut r = Res::default();
        for res in list {
            let role = res.role.as_deref().filter(|r| *r != "*");
            let dynamic = !res.reservations.is_empty() || res.reservation.is_some();
            // A static reservation: cpus or mem with a role and nothing else, of the one
            // role a set may hold.
            let static_role = role.filter(|role| {
                !dynamic
                    && matches!(res.name.as_str(), "cpus" | "mem")
                    && r.reserved.as_ref().is_none_or(|x| x.role == *role)
            });
            let reserved = role.is_some() || dynamic;
            match (res.name.as_str(), res.r#type) {
                ("cpus" | "mem" | "disk", value::Type::Scalar) => {
                    let Some(s) = &res.scalar else {
                        return Err(format!(
                            "Resource '{}' of type SCALAR has no 'scalar' value",
                            res.name
                        ));
                    };
                    if !s.value.is_finite() || s.value < 0.0 {
                        return Err(format!(
                            "Resource '{}' has an invalid value {}",
                            res.name, s.value
                        ));
                    }
                    if let Some(role) = static_role {
                        let x = r.reserved.get_or_insert_with(|| Reserved {
                            role: role.to_string(),
                            cpus: 0.0,
                            mem: 0.0,
                        });
                        match res.name.as_str() {
                            "cpus" => x.cpus += s.value,
                            _ => x.mem += s.value,
                        }
                        continue;
                    }
                    if reserved {
                        r.foreign.push(format!("{}(reserved)", res.name));
                        continue;
                    }
                    match res.name.as_str() {
                        "cpus" => r.cpus += s.value,
                        "mem" => r.mem += s.value,
                        _ => r.disk += s.value,
                    }
                }
                ("ports", value::Type::Ranges) => {
                    let Some(ranges) = &res.ranges else {
                        return Err("Resource 'ports' of type RANGES has no 'ranges' value".into());
                    };
                    for range in &ranges.range {
                        if range.begin > range.end {
                            return Err(format!(
                                "Resource 'ports' has an invalid range [{}-{}]",
                                range.begin, range.end
                            ));
                        }
                    }
                    if reserved {
                        r.foreign.push("ports(reserved)".into());
                        continue;
                    }
                    r.ports
                        .extend(ranges.range.iter().map(|x| (x.begin, x.end)));
                }
                ("cpus" | "mem" | "disk" | "ports", t) => {
                    return Err(format!(
                        "Resource '{}' has type {} where {} is expected",
                        res.name,
                        type_name(t),
                        if res.name == "ports" {
                            "RANGES"
                        } else {
                            "SCALAR"
                        }
                    ));
                }
                (name, _) => r.foreign.push(name.to_string()),
            }
        }
        r.ports = normalize(std::mem::take(&mut r.ports));
        Ok(r)
    }

    /// The resources as an offer carries them: unreserved, allocated to `role`.
    pub fn to_proto(&self, role: &str) -> Vec<Resource> {
        let alloc = || {
            Some(resource::AllocationInfo {
                role: Some(role.into()),
            })
        };
        let scalar = |name: &str, v: f64| Resource {
            name: name.into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: round(v) }),
            role: Some("*".into()),
            allocation_info: alloc(),
            ..Default::default()
        };
        let mut out = Vec::new();
        for (name, v) in [("cpus", self.cpus), ("mem", self.mem), ("disk", self.disk)] {
            if round(v) > 0.0 {
                out.push(scalar(name, v));
            }
        }
        if let Some(x) = self.reserved.as_ref().filter(|x| x.role == role) {
            for (name, v) in [("cpus", x.cpus), ("mem", x.mem)] {
                if round(v) > 0.0 {
                    out.push(Resource {
                        role: Some(x.role.as_str().into()),
                        ..scalar(name, v)
                    });
                }
            }
        }
        if !self.ports.is_empty() {
            out.push(Resource {
                name: "ports".into(),
                r#type: value::Type::Ranges,
                ranges: Some(value::Ranges {
                    range: self
                        .ports
                        .iter()
                        .map(|&(begin, end)| value::Range { begin, end })
                        .collect(),
                }),
                role: Some("*".into()),
                allocation_info: alloc(),
                ..Default::default()
            });
        }
        out
    }

    pub fn contains(&self, other: &Res) -> bool {
        let reserved_ok = match (&self.reserved, &other.reserved) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(have), Some(want)) => {
                have.role == want.role
                    && want.cpus <= have.cpus + EPSILON
                    && want.mem <= have.mem + EPSILON
            }
        };
        reserved_ok
            && other.foreign.is_empty()
            && other.cpus <= self.cpus + EPSILON
            && other.mem <= self.mem + EPSILON
            && other.disk <= self.disk + EPSILON
            && other
                .ports
                .iter()
                .all(|&(b, e)| self.ports.iter().any(|&(sb, se)| sb <= b && e <= se))
    }

    pub fn add(&mut self, other: &Res) {
        if let Some(o) = &other.reserved {
            let x = self.reserved.get_or_insert_with(|| Reserved {
                role: o.role.clone(),
                cpus: 0.0,
                mem: 0.0,
            });
            x.cpus += o.cpus;
            x.mem += o.mem;
        }
        self.cpus += other.cpus;
        self.mem += other.mem;
        self.disk += other.disk;
        let mut ports = std::mem::take(&mut self.ports);
        ports.extend_from_slice(&other.ports);
        self.ports = normalize(ports);
    }

    /// Removes `other`, never going below zero.
    pub fn subtract(&mut self, other: &Res) {
        if let (Some(x), Some(o)) = (&mut self.reserved, &other.reserved) {
            x.cpus = (x.cpus - o.cpus).max(0.0);
            x.mem = (x.mem - o.mem).max(0.0);
        }
        self.cpus = (self.cpus - other.cpus).max(0.0);
        self.mem = (self.mem - other.mem).max(0.0);
        self.disk = (self.disk - other.disk).max(0.0);
        for &(b, e) in &other.ports {
            let mut next = Vec::new();
            for &(sb, se) in &self.ports {
                if e < sb || b > se {
                    next.push((sb, se));
                    continue;
                }
                if sb < b {
                    next.push((sb, b - 1));
                }
                if e < se {
                    next.push((e + 1, se));
                }
            }
            self.ports = next;
        }
    }

    pub fn is_empty(&self) -> bool {
        round(self.cpus) <= 0.0
            && round(self.mem) <= 0.0
            && round(self.disk) <= 0.0
            && self.ports.is_empty()
            && self.foreign.is_empty()
            && self
                .reserved
                .as_ref()
                .is_none_or(|x| round(x.cpus) <= 0.0 && round(x.mem) <= 0.0)
    }

    /// Whether the allocator would offer this much: the master's MIN_CPUS / MIN_MEM.
    pub fn allocatable(&self) -> bool {
        let (rc, rm) = self
            .reserved
            .as_ref()
            .map_or((0.0, 0.0), |x| (x.cpus, x.mem));
        self.cpus + rc >= 0.01 - EPSILON / 10.0 || self.mem + rm >= 32.0
    }

    /// The object shape `/master/state` uses for resources.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }
}

/// The object shape `/master/state` uses, written without building a `Value` first: the
/// views of a large cluster hold tens of thousands of these.
impl Serialize for Res {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (rc, rm) = self
            .reserved
            .as_ref()
            .map_or((0.0, 0.0), |x| (x.cpus, x.mem));
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("cpus", &round(self.cpus + rc))?;
        m.serialize_entry("gpus", &0.0)?;
        m.serialize_entry("mem", &round(self.mem + rm))?;
        m.serialize_entry("disk", &round(self.disk))?;
        if !self.ports.is_empty() {
            m.serialize_entry("ports", &ranges_text(&self.ports))?;
        }
        m.end()
    }
}

impl std::fmt::Display for Res {
    /// The text form Mesos uses in its messages, e.g. `cpus(allocated: *):1; mem(...):128`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (name, v) in [("cpus", self.cpus), ("mem", self.mem), ("disk", self.disk)] {
            if round(v) > 0.0 {
                parts.push(format!("{name}(allocated: *):{}", round(v)));
            }
        }
        if !self.ports.is_empty() {
            parts.push(format!("ports(allocated: *):{}", ranges_text(&self.ports)));
        }
        if let Some(x) = &self.reserved {
            for (name, v) in [("cpus", x.cpus), ("mem", x.mem)] {
                if round(v) > 0.0 {
                    parts.push(format!("{name}(allocated: {0})({0}):{1}", x.role, round(v)));
                }
            }
        }
        for name in &self.foreign {
            parts.push(format!("{name}:?"));
        }
        if parts.is_empty() {
            return f.write_str("{}");
        }
        f.write_str(&parts.join("; "))
    }
}

pub fn ranges_text(ranges: &[(u64, u64)]) -> String {
    let inner: Vec<String> = ranges.iter().map(|(b, e)| format!("{b}-{e}")).collect();
    format!("[{}]", inner.join(", "))
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn type_name(t: value::Type) -> &'static str {
    match t {
        value::Type::Scalar => "SCALAR",
        value::Type::Ranges => "RANGES",
        value::Type::Set => "SET",
        value::Type::Text => "TEXT",
        value::Type::Other(_) => "UNKNOWN",
    }
}

fn normalize(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (b, e) in ranges {
        match out.last_mut() {
            Some(last) if b <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_containment() {
        let total = Res::new(4.0, 8192.0, 1000.0, vec![(31000, 32000)]);
        let task = Res::new(0.5, 128.0, 0.0, vec![(31005, 31006)]);
        assert!(total.contains(&task));
        let mut free = total.clone();
        free.subtract(&task);
        assert_eq!(free.ports, vec![(31000, 31004), (31007, 32000)]);
        assert!(!free.contains(&task));
        assert!((free.cpus - 3.5).abs() < 1e-9);
        free.add(&task);
        assert_eq!(free, total);
        let big = Res::new(5.0, 1.0, 0.0, vec![]);
        assert!(!total.contains(&big));
        let proto = total.to_proto("*");
        assert_eq!(Res::from_proto(&proto).unwrap(), total);
        assert_eq!(total.to_string().matches("allocated").count(), 4);
    }

    #[test]
    fn reservations_go_to_their_role_and_must_be_named() {
        let mut free = Res::new(0.1, 64.0, 0.0, vec![]).with_reserved("storage", 2.0, 4096.0);
        // Another role: offered the unreserved part only, the reservation stays.
        let other = free.take_for("*");
        assert_eq!(other.reserved, None);
        assert!((other.cpus - 0.1).abs() < 1e-9);
        assert_eq!(free.reserved.as_ref().map(|x| x.cpus), Some(2.0));
        free.add(&other);
        let offered = free.take_for("storage");
        let proto = offered.to_proto("storage");
        let reserved: Vec<_> = proto
            .iter()
            .filter(|r| r.role.as_deref() == Some("storage"))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(reserved, ["cpus", "mem"]);
        assert_eq!(Res::from_proto(&proto).unwrap(), offered);
        // A task asking for 1 cpu: only with the role named does the reservation hold it.
        let named = Res::from_proto(&[Resource {
            role: Some("storage".into()),
            ..scalar_res("cpus", 1.0)
        }])
        .unwrap();
        assert!(offered.contains(&named));
        assert!(!offered.contains(&scalar_only("cpus", 1.0)));
        let wrong_role = Res::from_proto(&[Resource {
            role: Some("other".into()),
            ..scalar_res("cpus", 1.0)
        }])
        .unwrap();
        assert!(!offered.contains(&wrong_role));
        let mut left = offered.clone();
        left.subtract(&named);
        assert_eq!(left.reserved.as_ref().map(|x| x.cpus), Some(1.0));
    }

    fn scalar_res(name: &str, v: f64) -> Resource {
        Resource {
            name: name.into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: v }),
            ..Default::default()
        }
    }

    fn scalar_only(name: &str, v: f64) -> Res {
        Res::from_proto(&[scalar_res(name, v)]).unwrap()
    }

    #[test]
    fn foreign_resources_are_never_contained() {
        let total = Res::new(4.0, 8192.0, 1000.0, vec![]);
        let gpu = Resource {
            name: "gpus".into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: 1.0 }),
            ..Default::default()
        };
        let r = Res::from_proto(&[gpu]).unwrap();
        assert!(!total.contains(&r));
        let bad = Resource {
            name: "cpus".into(),
            r#type: value::Type::Scalar,
            ..Default::default()
        };
        assert!(Res::from_proto(&[bad]).unwrap_err().contains("cpus"));
    }
}
