//! What the REX-Ray and dvdcli packages leave on a stand-in host when `dpkg`/`rpm` install
//! them (issue 10, volume driver): REX-Ray's service definition, so that the executor's
//! ordering after `scini` (host-steps section 7) has a real file to act on, and the binaries.
//! REX-Ray 0.x installs a SysV init script where there is no systemd (Ubuntu 14.04) and a
//! unit in `/etc/systemd/system` otherwise.

use crate::host::{FakeRoot, HostProfile, Init};

pub const INIT_SCRIPT: &str = "etc/init.d/rexray";
pub const UNIT: &str = "etc/systemd/system/rexray.service";

/// The post-installation effects of package `name`; nothing for other packages.
pub fn postinst(name: &str, profile: HostProfile, root: &FakeRoot) -> Result<(), String> {
    match name {
        "rexray" => {
            root.write(
                "usr/bin/rexray",
                "#!/bin/sh\n# devcluster stand-in for rexray\n",
            )?;
            match profile.init() {
                Init::Systemd => root.write(UNIT, UNIT_TEXT),
                Init::Upstart => root.write(INIT_SCRIPT, INIT_TEXT),
            }
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
