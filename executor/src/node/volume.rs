//! The volume driver's files (host-steps.md sections 7 and 8): the REX-Ray configuration
//! written from the plan (mode 0600: it holds credentials), and the DVDI isolator module
//! with its JSON and the agent's `modules`/`isolation` settings merged, never overwritten.
//! Values are quoted for YAML by [`yaml_str`], never pasted.

use crate::host::facts::Facts;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const REXRAY_CONFIG: &str = "/etc/rexray/config.yml";
pub const ISOLATOR_MODULE: &str = "com_emccode_mesos_DockerVolumeDriverIsolator";
const MODULE_JSON: &str = "/usr/lib/dvdi-mod.json";
const AGENT_MODULES: &str = "/etc/mesos-slave/modules";
const AGENT_ISOLATION: &str = "/etc/mesos-slave/isolation";
const DEFAULT_ISOLATION: &str = "posix/cpu,posix/mem";

/// What the REX-Ray configuration says.
pub struct RexRay<'a> {
    pub gateway: &'a str,
    pub system_name: &'a str,
    pub system_id: Option<&'a str>,
    pub protection_domain: &'a str,
    pub storage_pool: &'a str,
    /// The scoped volume-driver gateway user and password; `None` writes no credentials.
    pub credentials: Option<(&'a str, &'a str)>,
    /// `scaleio.insecure: false`: REX-Ray checks the certificate against the host's CAs.
    pub verify_gateway: bool,
}

/// A YAML double-quoted scalar.
pub fn yaml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn rexray_config(r: &RexRay) -> String {
    let system = match r.system_id {
        Some(id) => format!("  systemID: {}\n", yaml_str(id)),
        None => format!("  systemName: {}\n", yaml_str(r.system_name)),
    };
    let credentials = match r.credentials {
        Some((u, p)) => format!("  userName: {}\n  password: {}\n", yaml_str(u), yaml_str(p)),
        None => String::new(),
    };
    format!(
        "# Written by storage-executor from the node plan.\n\
         libstorage:\n  service: scaleio\n  integration:\n    volume:\n      operations:\n        \
         mount:\n          preempt: true\n\
         rexray:\n  modules:\n    default-docker:\n      type: docker\n      \
         host: unix:///run/docker/plugins/docker.sock\n      libstorage:\n        service: scaleio\n    \
         mesos:\n      type: docker\n      host: unix:///run/docker/plugins/mesos.sock\n      \
         libstorage:\n        service: scaleio\n        integration:\n          volume:\n            \
         operations:\n              unmount:\n                ignoreUsedCount: true\n\
         scaleio:\n  endpoint: {}\n  insecure: {}\n  thinOrThick: ThinProvisioned\n{credentials}{system}  \
         protectionDomainName: {}\n  storagePoolName: {}\n",
        yaml_str(&format!("https://{}/api", r.gateway)),
        !r.verify_gateway,
        yaml_str(r.protection_domain),
        yaml_str(r.storage_pool),
    )
}

/// REX-Ray's SysV init script (Ubuntu 14.04) and its systemd drop-in (RHEL 7), which make it
/// start after the SDC's `scini` module (host-steps section 7).
pub const REXRAY_INIT_SCRIPT: &str = "/etc/init.d/rexray";
pub const REXRAY_UNIT_DIRS: [&str; 3] = [
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];
pub const REXRAY_SCINI_DROPIN: &str = "/etc/systemd/system/rexray.service.d/after-scini.conf";
pub const REXRAY_SCINI_DROPIN_TEXT: &str =
    "# Written by storage-executor: REX-Ray needs the SDC's scini module.\n[Unit]\nAfter=scini.service\n";

/// The init script with `scini` in its LSB header's `Required-Start`, or `None` when it is
/// there already. A script without an LSB header is an error (nothing to order by).
pub fn init_script_after_scini(script: &str) -> Result<Option<String>, String> {
    let lines: Vec<&str> = script.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.trim() == "### BEGIN INIT INFO")
        .ok_or("it has no LSB header (### BEGIN INIT INFO)")?;
    let end = lines[begin..]
        .iter()
        .position(|l| l.trim() == "### END INIT INFO")
        .map(|i| begin + i)
        .ok_or("its LSB header has no ### END INIT INFO")?;
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let field = (begin + 1..end).find(|&i| {
        lines[i]
            .trim_start_matches('#')
            .trim_start()
            .starts_with("Required-Start:")
    });
    match field {
        Some(i) => {
            let (_, values) = lines[i].split_once(':').unwrap_or((lines[i], ""));
            if values.split_whitespace().any(|v| v == "scini") {
                return Ok(None);
            }
            out[i] = format!("{} scini", lines[i].trim_end());
        }
        None => out.insert(end, "# Required-Start:    scini".to_string()),
    }
    let mut text = out.join("\n");
    if script.ends_with('\n') {
        text.push('\n');
    }
    Ok(Some(text))
}

/// Writes `text` to `path` with `mode` unless it already holds exactly that; true when
/// written. The file is created with its mode (never briefly world-readable) and replaced
/// atomically.
pub fn write_if_changed(path: &Path, text: &str, mode: u32) -> Result<bool, String> {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        let current = fs::metadata(path).map(|m| m.permissions().mode() & 0o777);
        if current.is_ok_and(|m| m == mode) {
            return Ok(false);
        }
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp-storage-executor");
    let _ = fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(true)
}

/// Whether the isolator is already fully in place for `module_file` (`/usr/lib/<name>`).
pub fn isolator_in_place(facts: &Facts, module_file: &str) -> bool {
    let json = fs::read_to_string(facts.path(MODULE_JSON)).unwrap_or_default();
    facts.path(module_file).is_file()
        && json.contains(module_file)
        && fs::read_to_string(facts.path(AGENT_MODULES))
            .is_ok_and(|m| m.contains(&format!("file://{MODULE_JSON}")))
        && fs::read_to_string(facts.path(AGENT_ISOLATION))
            .is_ok_and(|i| i.split(',').any(|x| x.trim() == ISOLATOR_MODULE))
}

/// Installs the downloaded module as `module_file` (0644) and merges the agent settings.
pub fn install_isolator(facts: &Facts, downloaded: &Path, module_file: &str) -> Result<(), String> {
    let target = facts.path(module_file);
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::copy(downloaded, &target)
        .map_err(|e| format!("cannot copy the isolator to {}: {e}", target.display()))?;
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644))
        .map_err(|e| format!("cannot chmod {}: {e}", target.display()))?;

    // Libraries the agent loads today stay: an inline JSON or one named by file:// is merged.
    let current = fs::read_to_string(facts.path(AGENT_MODULES)).unwrap_or_default();
    let current = current.trim();
    let mut libraries: Vec<serde_json::Value> = Vec::new();
    let existing = if let Some(file) = current.strip_prefix("file://") {
        if file == MODULE_JSON {
            fs::read_to_string(facts.path(MODULE_JSON)).unwrap_or_default()
        } else {
            fs::read_to_string(facts.path(file))
                .map_err(|e| format!("{AGENT_MODULES} names {file}, which cannot be read: {e}"))?
        }
    } else {
        current.to_string()
    };
    if !existing.trim().is_empty() {
        let v: serde_json::Value = serde_json::from_str(&existing).map_err(|e| {
            format!("the agent's current modules are not JSON ({e}); merge by hand")
        })?;
        libraries.extend(v["libraries"].as_array().cloned().unwrap_or_default());
    }
    libraries.retain(|l| {
        !l["modules"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["name"] == ISOLATOR_MODULE))
    });
    libraries.push(serde_json::json!({
        "file": module_file,
        "modules": [{
            "name": ISOLATOR_MODULE,
            "parameters": [{"key": "isolator_command", "value": "/emc/dvdi_isolator"}]
        }]
    }));
    let json = serde_json::to_string_pretty(&serde_json::json!({ "libraries": libraries }))
        .map_err(|e| e.to_string())?;
    write_if_changed(&facts.path(MODULE_JSON), &format!("{json}\n"), 0o644)?;
    write_if_changed(
        &facts.path(AGENT_MODULES),
        &format!("file://{MODULE_JSON}\n"),
        0o644,
    )?;

    let isolation = fs::read_to_string(facts.path(AGENT_ISOLATION)).unwrap_or_default();
    let isolation = isolation.split_whitespace().collect::<Vec<_>>().join("");
    let rest = if isolation.is_empty() {
        DEFAULT_ISOLATION.to_string()
    } else {
        isolation
    };
    if !rest.split(',').any(|x| x == ISOLATOR_MODULE) {
        write_if_changed(
            &facts.path(AGENT_ISOLATION),
            &format!("{ISOLATOR_MODULE},{rest}\n"),
            0o644,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("executor-volume-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn values_are_quoted_for_yaml() {
        assert_eq!(yaml_str(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(yaml_str("x\ny: 1"), r#""x\ny: 1""#);
        let c = rexray_config(&RexRay {
            gateway: "10.0.0.1",
            system_name: "sys: x",
            system_id: None,
            protection_domain: "pd",
            storage_pool: "pool",
            credentials: Some(("rexray", "p\"w")),
            verify_gateway: false,
        });
        assert!(c.contains("endpoint: \"https://10.0.0.1/api\""), "{c}");
        assert!(c.contains("systemName: \"sys: x\""), "{c}");
        assert!(c.contains("password: \"p\\\"w\""), "{c}");
        assert!(c.contains("userName: \"rexray\""), "{c}");
        assert!(!c.contains("admin"), "{c}");
        assert_eq!(c.matches("libstorage:").count(), 3, "one map per module");
        assert!(c.contains("  insecure: true\n"), "{c}");
    }

    #[test]
    fn rexray_verifies_the_gateway_only_when_the_plan_says_it_can() {
        let r = |verify_gateway| RexRay {
            gateway: "10.0.0.1:443",
            system_name: "s",
            system_id: None,
            protection_domain: "pd",
            storage_pool: "pool",
            credentials: None,
            verify_gateway,
        };
        assert!(rexray_config(&r(true)).contains("  insecure: false\n"));
        assert!(rexray_config(&r(false)).contains("  insecure: true\n"));
    }

    #[test]
    fn init_script_gains_scini_once() {
        let script = "#!/bin/sh\n### BEGIN INIT INFO\n# Provides:          rexray\n\
                      # Required-Start:    $remote_fs $syslog\n# Default-Start:     2 3 4 5\n\
                      ### END INIT INFO\nexec rexray start\n";
        let edited = init_script_after_scini(script).unwrap().unwrap();
        assert!(
            edited.contains("# Required-Start:    $remote_fs $syslog scini\n"),
            "{edited}"
        );
        assert!(edited.ends_with("exec rexray start\n"));
        assert_eq!(init_script_after_scini(&edited).unwrap(), None);

        let bare = "#!/bin/sh\n### BEGIN INIT INFO\n# Provides: rexray\n### END INIT INFO\n";
        let edited = init_script_after_scini(bare).unwrap().unwrap();
        assert!(
            edited.contains("# Required-Start:    scini\n### END INIT INFO"),
            "{edited}"
        );
        // `sciniX` is not `scini`.
        let near = script.replace("$syslog", "sciniX");
        assert!(init_script_after_scini(&near).unwrap().is_some());
        let e = init_script_after_scini("#!/bin/sh\nexec rexray\n").unwrap_err();
        assert!(e.contains("LSB header"), "{e}");
    }

    #[test]
    fn config_is_root_only_and_written_once() {
        let d = tmp("cfg");
        let p = d.join("etc/rexray/config.yml");
        assert!(write_if_changed(&p, "a: 1\n", 0o600).unwrap());
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!write_if_changed(&p, "a: 1\n", 0o600).unwrap());
        assert!(write_if_changed(&p, "a: 2\n", 0o600).unwrap());
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn isolator_merges_modules_and_isolation() {
        let d = tmp("iso");
        let facts = Facts::new(&d);
        fs::create_dir_all(d.join("etc/mesos-slave")).unwrap();
        fs::write(
            d.join("etc/mesos-slave/modules"),
            r#"{"libraries":[{"file":"/usr/lib/other.so","modules":[{"name":"org_other"}]}]}"#,
        )
        .unwrap();
        fs::write(
            d.join("etc/mesos-slave/isolation"),
            "cgroups/cpu,cgroups/mem\n",
        )
        .unwrap();
        let so = d.join("dl.so");
        fs::write(&so, b"ELF").unwrap();
        let module = "/usr/lib/libmesos_dvdi_isolator-1.0.1.so";
        assert!(!isolator_in_place(&facts, module));
        install_isolator(&facts, &so, module).unwrap();
        assert!(isolator_in_place(&facts, module));
        let mode = fs::metadata(facts.path(module))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o644);
        let json = fs::read_to_string(d.join("usr/lib/dvdi-mod.json")).unwrap();
        assert!(
            json.contains("org_other") && json.contains(ISOLATOR_MODULE),
            "{json}"
        );
        assert_eq!(
            fs::read_to_string(d.join("etc/mesos-slave/isolation")).unwrap(),
            format!("{ISOLATOR_MODULE},cgroups/cpu,cgroups/mem\n")
        );
        // Again: nothing doubles.
        install_isolator(&facts, &so, module).unwrap();
        let json2 = fs::read_to_string(d.join("usr/lib/dvdi-mod.json")).unwrap();
        assert_eq!(json2.matches(ISOLATOR_MODULE).count(), 1, "{json2}");
        assert!(json2.contains("org_other"));
        let _ = fs::remove_dir_all(d);
    }
}
