//! Disks plugged into or pulled from a running stand-in host, as hot-plug does on a real one:
//! the kernel adds (or drops) `/sys/block/<name>`, the device node and its
//! `/proc/partitions` row, and nothing else changes until someone looks.

use super::{device_numbers, Disk, DiskUse, FakeRoot};
use std::fs;

/// The kernel name of a whole-disk path (`/dev/sdd` -> `sdd`), or why it is not one.
pub fn disk_name(path: &str) -> Result<&str, String> {
    let name = path
        .strip_prefix("/dev/")
        .ok_or_else(|| format!("disk path {path:?} is not under /dev/"))?;
    let valid = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if valid {
        Ok(name)
    } else {
        Err(format!(
            "disk path {path:?} does not name a kernel disk (like /dev/sdd)"
        ))
    }
}

impl FakeRoot {
    /// A new free disk `name` of `gib` GiB appears; `false` when the host already has it.
    pub fn plug_disk(&self, name: &str, gib: u64) -> Result<bool, String> {
        let dir = format!("sys/block/{name}");
        if self.join(&dir).exists() {
            return Ok(false);
        }
        let disk = Disk::new(name, gib, DiskUse::Free);
        let index = fs::read_dir(self.join("sys/block")).map_or(0, |d| d.count()) as u32;
        let (major, minor) = device_numbers(&disk, index);
        self.sysfs_device(&dir, (major, minor), disk.sectors)?;
        self.write(&format!("{dir}/removable"), "0\n")?;
        self.write(&format!("{dir}/ro"), "0\n")?;
        self.write(&format!("{dir}/queue/rotational"), "1\n")?;
        self.device(name, &[])?;
        let mut table = fs::read_to_string(self.join("proc/partitions")).unwrap_or_default();
        table.push_str(&format!(
            "{major:>4} {minor:>7} {:>10} {name}\n",
            disk.sectors / 2
        ));
        self.write("proc/partitions", &table)?;
        Ok(true)
    }

    /// Disk `name` is pulled out; `false` when the host has no such disk. A disk with
    /// partitions or holders (the system disk, an LVM member) is refused: what its mounts
    /// would become is beyond this stand-in.
    pub fn unplug_disk(&self, name: &str) -> Result<bool, String> {
        let dir = self.join(&format!("sys/block/{name}"));
        if !dir.exists() {
            return Ok(false);
        }
        let holders = fs::read_dir(dir.join("holders")).map_or(0, |d| d.count());
        let partitions = fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .flatten()
            .filter(|e| e.path().join("partition").exists())
            .count();
        if holders > 0 || partitions > 0 {
            return Err(format!(
                "disk {name} has partitions or holders; only a whole disk can be pulled"
            ));
        }
        fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        let node = self.join(&format!("dev/{name}"));
        fs::remove_file(&node).map_err(|e| format!("cannot remove {}: {e}", node.display()))?;
        let table = fs::read_to_string(self.join("proc/partitions")).unwrap_or_default();
        let kept: String = table
            .lines()
            .filter(|l| l.split_whitespace().nth(3) != Some(name))
            .map(|l| format!("{l}\n"))
            .collect();
        self.write("proc/partitions", &kept)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{default_disks, device_paths, HostProfile};
    use super::*;

    #[test]
    fn a_plugged_disk_appears_as_the_kernel_shows_one_and_a_pulled_one_is_gone() {
        let dir = std::env::temp_dir().join(format!("devcluster-hotplug-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let root =
            FakeRoot::create(&dir, HostProfile::Rhel7, &default_disks(), "h", None).expect("root");
        assert_eq!(root.plug_disk("sdd", 100), Ok(true));
        assert_eq!(root.plug_disk("sdd", 100), Ok(false), "already there");
        let size = fs::read_to_string(root.join("sys/block/sdd/size")).unwrap();
        assert_eq!(size, format!("{}\n", 100u64 << 21));
        assert_eq!(
            fs::read_to_string(root.join("sys/block/sdd/dev")).unwrap(),
            "8:48\n"
        );
        let table = fs::read_to_string(root.join("proc/partitions")).unwrap();
        assert!(table.ends_with("   8      48  104857600 sdd\n"), "{table}");
        assert!(device_paths(&root).contains("/dev/sdd"));

        assert_eq!(root.unplug_disk("sdd"), Ok(true));
        assert_eq!(root.unplug_disk("sdd"), Ok(false), "already gone");
        assert!(!root.join("sys/block/sdd").exists());
        assert!(!device_paths(&root).contains("/dev/sdd"));
        let after = fs::read_to_string(root.join("proc/partitions")).unwrap();
        assert!(!after.contains("sdd") && after.contains("xvdb"), "{after}");
        let e = root.unplug_disk("xvda").unwrap_err();
        assert!(e.contains("xvda") && e.contains("partitions"), "{e}");
        assert!(root.join("sys/block/xvda").exists());

        assert_eq!(disk_name("/dev/sdd"), Ok("sdd"));
        assert!(disk_name("sdd").unwrap_err().contains("not under /dev/"));
        assert!(disk_name("/dev/../etc").is_err());
        assert!(disk_name("/dev/").is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
