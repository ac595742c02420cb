//! The resource arithmetic the master needs: unreserved cpus, mem, disk and port ranges.

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
    /// Names of resources no agent here has (custom or reserved ones): a set holding any
    /// is never contained in an offer.
    pub foreign: Vec<String>,
}

impl Res {
    pub fn new(cpus: f64, mem: f64, disk: f64, ports: Vec<(u64, u64)>) -> Res {
        Res {
            cpus,
            mem,
            disk,
            ports: normalize(ports),
            foreign: Vec::new(),
        }
    }

    /// Reads a resource list; malformed entries are an error naming the resource.
    pub fn from_proto(list: &[Resource]) -> Result<Res, String> {
        let mut r = Res::default();
        for res in list {
            let reserved = res.role.as_deref().is_some_and(|role| role != "*")
                || !res.reservations.is_empty()
                || res.reservation.is_some();
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
        other.foreign.is_empty()
            && other.cpus <= self.cpus + EPSILON
            && other.mem <= self.mem + EPSILON
            && other.disk <= self.disk + EPSILON
            && other
                .ports
                .iter()
                .all(|&(b, e)| self.ports.iter().any(|&(sb, se)| sb <= b && e <= se))
    }

    pub fn add(&mut self, other: &Res) {
        self.cpus += other.cpus;
        self.mem += other.mem;
        self.disk += other.disk;
        let mut ports = std::mem::take(&mut self.ports);
        ports.extend_from_slice(&other.ports);
        self.ports = normalize(ports);
    }

    /// Removes `other`, never going below zero.
    pub fn subtract(&mut self, other: &Res) {
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
    }

    /// Whether the allocator would offer this much: the master's MIN_CPUS / MIN_MEM.
    pub fn allocatable(&self) -> bool {
        self.cpus >= 0.01 - EPSILON / 10.0 || self.mem >= 32.0
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
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("cpus", &round(self.cpus))?;
        m.serialize_entry("gpus", &0.0)?;
        m.serialize_entry("mem", &round(self.mem))?;
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
