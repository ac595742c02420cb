//! Which block devices the node may give to the storage system: discovered from `/sys/block`,
//! the mount table, swaps and on-disk signatures (never from `fdisk`/`blkid` text), or an
//! imperative list from the plan that is checked device by device.

use super::facts::{BlockDevice, Facts};

/// Devices found usable, and why each other one was passed over (for the log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub usable: Vec<String>,
    pub skipped: Vec<(String, String)>,
}

/// Whole disks with no partition table, signature, mount, holder or swap use; never loop,
/// ram, rom, device-mapper or mapped storage volumes, nor the disk holding `/`.
pub fn discover(facts: &Facts) -> Result<Discovery, String> {
    let in_use = facts.devices_in_use()?;
    let root = facts.root_device()?;
    let mut d = Discovery::default();
    for dev in facts.block_devices()? {
        match unusable(facts, &dev, &in_use, root.as_deref()) {
            None => d.usable.push(format!("/dev/{}", dev.name)),
            Some(why) => d.skipped.push((format!("/dev/{}", dev.name), why)),
        }
    }
    Ok(d)
}

/// Checks the plan's list: every device must exist and be unused; the error names the first
/// one that is not.
pub fn check_listed(facts: &Facts, wanted: &[String]) -> Result<Vec<String>, String> {
    let in_use = facts.devices_in_use()?;
    let root = facts.root_device()?;
    let all = facts.block_devices()?;
    for path in wanted {
        let name = path.strip_prefix("/dev/").unwrap_or(path);
        let Some(dev) = all.iter().find(|d| d.name == name) else {
            return Err(format!(
                "device {path} from the node's attributes does not exist on this host"
            ));
        };
        if let Some(why) = unusable(facts, dev, &in_use, root.as_deref()) {
            return Err(format!(
                "device {path} from the node's attributes cannot be used: {why}"
            ));
        }
    }
    Ok(wanted.to_vec())
}

fn unusable(
    facts: &Facts,
    dev: &BlockDevice,
    in_use: &[String],
    root: Option<&str>,
) -> Option<String> {
    let name = dev.name.as_str();
    for (prefix, what) in [
        ("loop", "a loop device"),
        ("ram", "a RAM disk"),
        ("zram", "a RAM disk"),
        ("sr", "an optical drive"),
        ("dm-", "a device-mapper device"),
        ("md", "a software RAID device"),
        ("scini", "a mapped storage volume"),
    ] {
        if name.starts_with(prefix) {
            return Some(what.into());
        }
    }
    if dev.removable {
        return Some("removable".into());
    }
    if dev.read_only {
        return Some("read-only".into());
    }
    if dev.sectors == 0 {
        return Some("no media (size 0)".into());
    }
    let own = format!("/dev/{name}");
    let parts: Vec<String> = dev.partitions.iter().map(|p| format!("/dev/{p}")).collect();
    if root.is_some_and(|r| r == own || parts.iter().any(|p| p == r)) {
        return Some("holds the root filesystem".into());
    }
    if !dev.partitions.is_empty() {
        return Some(format!("has partitions ({})", dev.partitions.join(", ")));
    }
    if !dev.holders.is_empty() {
        return Some(format!("held by {}", dev.holders.join(", ")));
    }
    if let Some(used) = in_use.iter().find(|u| **u == own) {
        return Some(format!("{used} is mounted or used as swap"));
    }
    match facts.device_head(name) {
        None => Some(format!("cannot read {own} to look for signatures")),
        Some(head) => signature(&head).map(|s| format!("carries a {s} signature")),
    }
}

/// The on-disk signature at the start of a device, if any.
pub fn signature(head: &[u8]) -> Option<&'static str> {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    if at(0, b"XFSB") {
        Some("XFS")
    } else if at(1080, &[0x53, 0xef]) {
        Some("ext2/3/4")
    } else if at(512, b"EFI PART") {
        Some("GPT")
    } else if at(512, b"LABELONE") || at(536, b"LVM2 001") {
        Some("LVM")
    } else if at(4086, b"SWAPSPACE2") || at(4086, b"SWAP-SPACE") {
        Some("swap")
    } else if at(510, &[0x55, 0xaa]) {
        Some("MBR")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::{Path, PathBuf};

    /// A fake `/sys/block` tree with mounts and swaps.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let dir = std::env::temp_dir()
                .join(format!("executor-devices-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("sys/block")).unwrap();
            fs::create_dir_all(dir.join("dev")).unwrap();
            fs::create_dir_all(dir.join("proc")).unwrap();
            let t = Tree(dir);
            t.write("proc/mounts", "proc /proc proc rw 0 0\n");
            t.write(
                "proc/swaps",
                "Filename\t\t\t\tType\t\tSize\tUsed\tPriority\n",
            );
            t
        }
        fn write(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fn disk(&self, name: &str, sectors: u64) -> &Tree {
            let dir = format!("sys/block/{name}");
            self.write(&format!("{dir}/size"), &format!("{sectors}\n"));
            self.write(&format!("{dir}/removable"), "0\n");
            self.write(&format!("{dir}/ro"), "0\n");
            fs::create_dir_all(self.0.join(&dir).join("holders")).unwrap();
            fs::write(self.0.join("dev").join(name), vec![0u8; 8192]).unwrap();
            self
        }
        fn partition(&self, disk: &str, part: &str) {
            self.write(&format!("sys/block/{disk}/{part}/partition"), "1\n");
        }
        fn head(&self, name: &str, off: usize, magic: &[u8]) {
            let p = self.0.join("dev").join(name);
            let mut bytes = fs::read(&p).unwrap();
            bytes[off..off + magic.len()].copy_from_slice(magic);
            fs::write(p, bytes).unwrap();
        }
        fn facts(&self) -> Facts {
            Facts::new(&self.0)
        }
        fn root(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn why(d: &Discovery, dev: &str) -> String {
        d.skipped
            .iter()
            .find(|(n, _)| n == dev)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| panic!("{dev} not skipped: {d:?}"))
    }

    #[test]
    fn only_free_whole_disks_are_offered() {
        let t = Tree::new("mixed");
        for d in [
            "sda", "sdb", "sdc", "sdd", "sde", "sdf", "sdg", "loop0", "ram0", "sr0",
        ] {
            t.disk(d, 1 << 20);
        }
        t.disk("scinia", 1 << 20);
        t.disk("sdh", 0);
        // sda: the system disk, root mounted by UUID, second partition swap.
        t.partition("sda", "sda1");
        t.partition("sda", "sda2");
        fs::create_dir_all(t.root().join("dev/disk/by-uuid")).unwrap();
        std::os::unix::fs::symlink("../../sda1", t.root().join("dev/disk/by-uuid/u-1")).unwrap();
        t.write(
            "proc/mounts",
            "/dev/disk/by-uuid/u-1 / ext4 rw 0 0\nproc /proc proc rw 0 0\n/dev/sdf /data xfs rw 0 0\n",
        );
        t.write(
            "proc/swaps",
            "Filename\tType\tSize\tUsed\tPriority\n/dev/sda2 partition 1 0 -1\n/dev/sdg partition 1 0 -2\n",
        );
        // sdc: ext4 on the whole disk; sdd: LVM member held by dm-0; sde: GPT.
        t.head("sdc", 1080, &[0x53, 0xef]);
        t.head("sdd", 512, b"LABELONE");
        fs::create_dir_all(t.root().join("sys/block/sdd/holders/dm-0")).unwrap();
        t.head("sde", 512, b"EFI PART");
        t.write("sys/block/sr0/removable", "1\n");

        let d = discover(&t.facts()).unwrap();
        assert_eq!(d.usable, ["/dev/sdb"]);
        assert!(why(&d, "/dev/sda").contains("root filesystem"));
        assert!(why(&d, "/dev/sdc").contains("ext2/3/4"));
        assert!(why(&d, "/dev/sdd").contains("held by dm-0"));
        assert!(why(&d, "/dev/sde").contains("GPT"));
        assert!(why(&d, "/dev/sdf").contains("mounted"));
        assert!(why(&d, "/dev/sdg").contains("swap"));
        assert!(why(&d, "/dev/sdh").contains("size 0"));
        assert!(why(&d, "/dev/loop0").contains("loop"));
        assert!(why(&d, "/dev/ram0").contains("RAM"));
        assert!(why(&d, "/dev/sr0").contains("optical"));
        assert!(why(&d, "/dev/scinia").contains("mapped storage volume"));
    }

    #[test]
    fn partitioned_disk_is_skipped_even_when_unmounted() {
        let t = Tree::new("parts");
        t.disk("vdb", 1 << 20).disk("vdc", 1 << 20);
        t.partition("vdb", "vdb1");
        let d = discover(&t.facts()).unwrap();
        assert_eq!(d.usable, ["/dev/vdc"]);
        assert!(why(&d, "/dev/vdb").contains("partitions (vdb1)"));
    }

    #[test]
    fn listed_devices_must_exist_and_be_unused() {
        let t = Tree::new("listed");
        t.disk("sdb", 1 << 20).disk("sdc", 1 << 20);
        t.head("sdc", 0, b"XFSB");
        let f = t.facts();
        assert_eq!(
            check_listed(&f, &["/dev/sdb".into()]).unwrap(),
            ["/dev/sdb"]
        );
        let e = check_listed(&f, &["/dev/sdb".into(), "/dev/sdz".into()]).unwrap_err();
        assert!(
            e.contains("/dev/sdz") && e.contains("does not exist"),
            "{e}"
        );
        let e = check_listed(&f, &["/dev/sdc".into()]).unwrap_err();
        assert!(e.contains("/dev/sdc") && e.contains("XFS"), "{e}");
    }

    #[test]
    fn missing_sysfs_is_an_error_naming_it() {
        let dir =
            std::env::temp_dir().join(format!("executor-devices-none-{}", std::process::id()));
        fs::create_dir_all(dir.join("proc")).unwrap();
        fs::write(dir.join("proc/mounts"), "").unwrap();
        let e = discover(&Facts::new(&dir)).unwrap_err();
        assert!(e.contains("sys/block"), "{e}");
        let _ = fs::remove_dir_all(dir);
    }
}
