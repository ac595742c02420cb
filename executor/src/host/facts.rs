//! Host facts, read under a root directory (default `/`; the dev cluster points
//! `STORAGE_HOST_ROOT` at a fake root). Reads only: nothing here changes the host.

use std::fs;
use std::path::{Path, PathBuf};

/// The environment variable naming the root (the dev cluster's stand-in contract).
pub const ROOT_ENV: &str = storage_framework::contract::env::HOST_ROOT;

pub use storage_framework::contract::Platform;

/// Reads host files under one root.
#[derive(Debug, Clone)]
pub struct Facts {
    root: PathBuf,
}

impl Facts {
    pub fn new(root: impl Into<PathBuf>) -> Facts {
        Facts { root: root.into() }
    }

    /// The root `STORAGE_HOST_ROOT` names, else `/`.
    pub fn from_env() -> Facts {
        match std::env::var_os(ROOT_ENV) {
            Some(r) if !r.is_empty() => Facts::new(r),
            _ => Facts::new("/"),
        }
    }

    /// `<root>/<path>`; `path` may start with `/`.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    pub fn read(&self, path: &str) -> Result<String, String> {
        let p = self.path(path);
        fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    }

    /// The supported platform this host runs, or an error naming the OS it found.
    pub fn platform(&self) -> Result<Platform, String> {
        let text = self.read("/etc/os-release")?;
        detect_platform(&text)
    }

    /// `uname -r`.
    pub fn kernel(&self) -> Result<String, String> {
        Ok(self.read("/proc/sys/kernel/osrelease")?.trim().to_string())
    }

    /// `/proc/sys/kernel/random/boot_id`: changes with every boot.
    pub fn boot_id(&self) -> Option<String> {
        self.read("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// The boot loader's default entry, naming the file it comes from ([`grub_default`]).
    pub fn boot_loader_default(&self) -> String {
        let default_grub = self.read("/etc/default/grub").ok();
        let grubenv = ["/boot/grub/grubenv", "/boot/grub2/grubenv"]
            .into_iter()
            .find_map(|p| Some((p, self.read(p).ok()?)));
        grub_default(
            default_grub.as_deref(),
            grubenv.as_ref().map(|(p, t)| (*p, t.as_str())),
        )
    }

    /// Device paths in `/proc/mounts` and `/proc/swaps`, symlinks resolved under the root
    /// (`/dev/disk/by-uuid/...` becomes `/dev/xvda1`).
    pub fn devices_in_use(&self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for line in self.read("/proc/mounts")?.lines() {
            if let Some(dev) = line.split_whitespace().next() {
                out.push(self.resolve_dev(dev));
            }
        }
        // A host without swap support may lack the file; no swap then.
        if let Ok(swaps) = self.read("/proc/swaps") {
            for line in swaps.lines().skip(1) {
                if let Some(dev) = line.split_whitespace().next() {
                    out.push(self.resolve_dev(dev));
                }
            }
        }
        Ok(out)
    }

    /// The mount point of `/` by its device.
    pub fn root_device(&self) -> Result<Option<String>, String> {
        Ok(self.read("/proc/mounts")?.lines().find_map(|line| {
            let mut f = line.split_whitespace();
            let (dev, at) = (f.next()?, f.next()?);
            (at == "/" && dev.starts_with("/dev/")).then(|| self.resolve_dev(dev))
        }))
    }

    /// `/dev/<name>` for a path under `/dev` that is a symlink under the root.
    fn resolve_dev(&self, dev: &str) -> String {
        if !dev.starts_with("/dev/") {
            return dev.to_string();
        }
        let mut current = self.path(dev);
        for _ in 0..8 {
            match fs::read_link(&current) {
                Ok(target) => {
                    current = if target.is_absolute() {
                        self.path(&target.to_string_lossy())
                    } else {
                        current.parent().map_or(target.clone(), |p| p.join(&target))
                    }
                }
                Err(_) => break,
            }
        }
        match current.file_name() {
            Some(name) if current != self.path(dev) => {
                format!("/dev/{}", name.to_string_lossy())
            }
            _ => dev.to_string(),
        }
    }

    /// The block devices of `/sys/block`, with what sysfs says about each.
    pub fn block_devices(&self) -> Result<Vec<BlockDevice>, String> {
        let dir = self.path("/sys/block");
        let entries =
            fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let base = entry.path();
            let flag = |f: &str| fs::read_to_string(base.join(f)).is_ok_and(|s| s.trim() == "1");
            let holders = list(&base.join("holders"));
            let partitions: Vec<String> = list(&base)
                .into_iter()
                .filter(|p| p.starts_with(&name) && base.join(p).join("partition").exists())
                .collect();
            let sectors = fs::read_to_string(base.join("size"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            out.push(BlockDevice {
                name,
                sectors,
                removable: flag("removable"),
                read_only: flag("ro"),
                holders,
                partitions,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The first 64 KiB of `/dev/<name>`; `None` when it cannot be read.
    pub fn device_head(&self, name: &str) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut f = fs::File::open(self.path(&format!("/dev/{name}"))).ok()?;
        let mut buf = vec![0; 64 * 1024];
        let mut filled = 0;
        while filled < buf.len() {
            match f.read(&mut buf[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        buf.truncate(filled);
        Some(buf)
    }
}

fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// One entry of `/sys/block`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    pub name: String,
    /// 512-byte sectors.
    pub sectors: u64,
    pub removable: bool,
    pub read_only: bool,
    pub holders: Vec<String>,
    pub partitions: Vec<String>,
}

/// The entry GRUB boots by default, from `/etc/default/grub` and the grubenv file `(path,
/// text)`: the grubenv's `saved_entry` when `GRUB_DEFAULT=saved` (or no `/etc/default/grub`),
/// else `GRUB_DEFAULT`; `unknown` when neither says.
pub fn grub_default(default_grub: Option<&str>, grubenv: Option<(&str, &str)>) -> String {
    // Shell syntax: the last assignment wins; quotes are not part of the value.
    let value = |text: &str, key: &str| {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .next_back()
            .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
    };
    let setting = default_grub.and_then(|t| value(t, "GRUB_DEFAULT"));
    let saved = grubenv.and_then(|(path, t)| {
        let e = value(t, "saved_entry").filter(|e| !e.is_empty())?;
        Some(format!("saved_entry={e} ({path})"))
    });
    match (setting.as_deref(), saved) {
        (Some("saved") | None, Some(s)) => s,
        (Some("saved"), None) => {
            "GRUB_DEFAULT=saved (/etc/default/grub) with no saved_entry: the first entry".into()
        }
        (Some(v), _) => format!("GRUB_DEFAULT={v} (/etc/default/grub)"),
        (None, None) => "unknown".into(),
    }
}

/// `ID` and `VERSION_ID` of an os-release text decide; anything else is refused by name.
pub fn detect_platform(os_release: &str) -> Result<Platform, String> {
    Platform::detect(os_release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_releases_are_recognised() {
        let ubuntu = "NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"14.04\"\nPRETTY_NAME=\"Ubuntu 14.04.5 LTS\"\n";
        assert_eq!(detect_platform(ubuntu), Ok(Platform::Ubuntu1404));
        let rhel = "NAME=\"Red Hat Enterprise Linux Server\"\nID=\"rhel\"\nVERSION_ID=\"7.9\"\n";
        assert_eq!(detect_platform(rhel), Ok(Platform::Rhel7));
        let centos = "ID=\"centos\"\nID_LIKE=\"rhel fedora\"\nVERSION_ID=\"7\"\n";
        assert_eq!(detect_platform(centos), Ok(Platform::Rhel7));
    }

    #[test]
    fn other_releases_are_refused_by_name() {
        let xenial = "ID=ubuntu\nVERSION_ID=\"16.04\"\nPRETTY_NAME=\"Ubuntu 16.04.7 LTS\"\n";
        let e = detect_platform(xenial).unwrap_err();
        assert!(e.contains("Ubuntu 16.04.7 LTS"), "{e}");
        let rhel8 = "ID=\"rhel\"\nVERSION_ID=\"8.4\"\n";
        assert!(detect_platform(rhel8).unwrap_err().contains("8.4"));
        assert!(detect_platform("").unwrap_err().contains("unsupported"));
    }

    #[test]
    fn the_boot_loader_default_comes_from_grub_s_files() {
        let env = Some((
            "/boot/grub/grubenv",
            "# GRUB Environment Block\nsaved_entry=Ubuntu, with Linux 4.15.0-45-generic\n",
        ));
        let saved = "saved_entry=Ubuntu, with Linux 4.15.0-45-generic (/boot/grub/grubenv)";
        let first = "GRUB_DEFAULT=0 (/etc/default/grub)";
        // (/etc/default/grub, grubenv) -> what the error names
        let table = [
            (Some("GRUB_DEFAULT=saved\n"), env, saved),
            (
                Some("# GRUB_DEFAULT=1\nGRUB_DEFAULT=\"saved\"\n"),
                env,
                saved,
            ),
            (None, env, saved),
            (Some("GRUB_DEFAULT=0\nGRUB_TIMEOUT=10\n"), env, first),
            (Some("GRUB_DEFAULT=1\nGRUB_DEFAULT=0\n"), None, first),
            (
                Some("GRUB_DEFAULT='1>2'\n"),
                None,
                "GRUB_DEFAULT=1>2 (/etc/default/grub)",
            ),
            (
                Some("GRUB_DEFAULT=saved\n"),
                Some(("/boot/grub/grubenv", "saved_entry=\n")),
                "GRUB_DEFAULT=saved (/etc/default/grub) with no saved_entry: the first entry",
            ),
            (Some("GRUB_TIMEOUT=10\n"), None, "unknown"),
            (None, None, "unknown"),
        ];
        for (default_grub, grubenv, want) in table {
            assert_eq!(
                grub_default(default_grub, grubenv),
                want,
                "{default_grub:?}"
            );
        }
        let dir = std::env::temp_dir().join(format!("facts-grub-{}", std::process::id()));
        assert_eq!(Facts::new(&dir).boot_loader_default(), "unknown");
    }

    #[test]
    fn missing_os_release_names_the_file() {
        let dir = std::env::temp_dir().join(format!("facts-empty-{}", std::process::id()));
        let e = Facts::new(&dir).platform().unwrap_err();
        assert!(e.contains("etc/os-release"), "{e}");
    }
}
