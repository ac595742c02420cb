//! What the REX-Ray and dvdcli packages leave on a stand-in host when `dpkg`/`rpm` install
//! them: REX-Ray's service definition, so that the executor's
//! ordering after `scini` (host-steps section 7) has a real file to act on, and the binaries.
//! REX-Ray 0.x installs a SysV init script where there is no systemd (Ubuntu 14.04) and a
//! unit in `/etc/systemd/system` otherwise. The service is enabled at boot but not started:
//! whoever installs it starts it (after writing its configuration).

use crate::host::{FakeRoot, HostState, Init, Service, ServiceKind};

pub const INIT_SCRIPT: &str = "etc/init.d/rexray";
pub const UNIT: &str = "etc/systemd/system/rexray.service";

/// The post-installation effects of package `name`; nothing for other packages.
pub fn postinst(name: &str, state: &mut HostState, root: &FakeRoot) -> Result<(), String> {
    match name {
        "rexray" => {
            root.write(
                "usr/bin/rexray",
                "#!/bin/sh\n# devcluster stand-in for rexray\n",
            )?;
            let kind = match state.profile.init() {
                Init::Systemd => {
                    root.write(UNIT, UNIT_TEXT)?;
                    ServiceKind::Systemd
                }
                Init::Upstart => {
                    root.write(INIT_SCRIPT, INIT_TEXT)?;
                    ServiceKind::SysV
                }
            };
            state
                .services
                .entry("rexray".to_string())
                .or_insert(Service {
                    kind,
                    running: false,
                    enabled: true,
                    pid: None,
                    restarts: 0,
                });
            Ok(())
        }
        "dvdcli" => root.write(
            "usr/bin/dvdcli",
            "#!/bin/sh\n# devcluster stand-in for dvdcli\n",
        ),
        _ => Ok(()),
    }
}

const UNIT_TEXT: &str = "[Unit]\nDescription=rexray\nBefore=docker.service\n\n[Service]\n\
EnvironmentFile=/etc/rexray/rexray.env\nExecStart=/usr/bin/rexray start -f\nExecReload=/bin/kill -HUP $MAINPID\n\
KillMode=process\n\n[Install]\nWantedBy=docker.service\n";

const INIT_TEXT: &str = "#!/bin/sh\n### BEGIN INIT INFO\n# Provides:          rexray\n\
# Required-Start:    $remote_fs $syslog\n# Required-Stop:     $remote_fs $syslog\n\
# Default-Start:     2 3 4 5\n# Default-Stop:      0 1 6\n# Short-Description: Start daemon at boot time\n\
# Description:       Enable service provided by daemon.\n### END INIT INFO\n\n\
case \"$1\" in\n  start) /usr/bin/rexray start ;;\n  stop) /usr/bin/rexray stop ;;\n  status) /usr/bin/rexray status ;;\n\
  restart) /usr/bin/rexray restart ;;\nesac\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostProfile;

    #[test]
    fn rexray_leaves_its_service_for_the_hosts_init_system() {
        for (profile, file, kind) in [
            (HostProfile::Ubuntu1404, INIT_SCRIPT, ServiceKind::SysV),
            (HostProfile::Rhel7, UNIT, ServiceKind::Systemd),
        ] {
            let dir = std::env::temp_dir().join(format!(
                "devcluster-rexray-{}-{}",
                profile.name(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let root = FakeRoot::create(&dir, profile, &[], "h1", None).unwrap();
            let mut state = root.state().unwrap();
            let before = state.services.len();
            postinst("rexray", &mut state, &root).unwrap();
            postinst("dvdcli", &mut state, &root).unwrap();
            postinst("emc-scaleio-sds", &mut state, &root).unwrap();
            assert!(root.join(file).is_file(), "{}", profile.name());
            let s = &state.services["rexray"];
            assert_eq!(s.kind, kind);
            assert!(s.enabled && !s.running, "installed, enabled, not started");
            assert!(root.join("usr/bin/dvdcli").is_file());
            assert_eq!(
                state.services.len(),
                before + 1,
                "other packages add nothing here"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
