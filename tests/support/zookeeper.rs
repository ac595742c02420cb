//! A real ZooKeeper (Debian's `zookeeper` package) for tests: a standalone server on a free
//! loopback port with its own data directory and config, stopped on drop.
#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/test.sh` (apt-get install zookeeper) puts the server.
const CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";
const MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

pub struct ZooKeeper {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

include!("ports.rs");

impl ZooKeeper {
    /// Starts a server in `dir` (created) and waits until it answers `ruok`.
    pub fn start(dir: &Path) -> ZooKeeper {
        assert!(
            Path::new("/usr/share/java/zookeeper.jar").exists(),
            "ZooKeeper is not installed (scripts/test.sh installs Debian's zookeeper package)"
        );
        // Its own range: a test may start a scheduler (`cluster::free_port`) beside it.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let port = port_below_ephemeral(16_000, 4_000, &NEXT);
        std::fs::create_dir_all(dir.join("data")).expect("zk data dir");
        std::fs::write(
            dir.join("zoo.cfg"),
            format!(
                "tickTime=500\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\nmaxSessionTimeout=20000\n4lw.commands.whitelist=ruok\n",
                dir.join("data").display()
            ),
        )
        .expect("zoo.cfg");
        let mut zk = ZooKeeper {
            port,
            dir: dir.to_path_buf(),
            child: None,
        };
        zk.restart();
        zk
    }

    pub fn uri(&self, path: &str) -> String {
        format!("zk://127.0.0.1:{}{path}", self.port)
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts (again) on the same port and data: a ZooKeeper restart.
    pub fn restart(&mut self) {
        self.stop();
        let log = std::fs::File::create(self.dir.join("zookeeper.log")).expect("zk log");
        let child = Command::new("java")
            .args(["-Xmx128m", "-cp", CLASSPATH, MAIN])
            .arg(self.dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start java (ZooKeeper)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if ruok(self.port) {
                return;
            }
            assert!(Instant::now() < deadline, "ZooKeeper did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl ZooKeeper {
    /// Every znode under `root` (itself included) and its data, as a client without
    /// credentials reads them; a znode it may not read is listed with `None`.
    pub fn read_tree(&self, root: &str) -> Vec<(String, Option<Vec<u8>>)> {
        use storage_framework::store::zk::wire::{op, Conn, Dec, Enc};
        let addr = format!("127.0.0.1:{}", self.port);
        let mut c = Conn::connect(&addr, 10_000, None, Duration::from_secs(3))
            .expect("connect")
            .expect("session");
        let mut out = Vec::new();
        let mut todo = vec![root.to_owned()];
        while let Some(path) = todo.pop() {
            let mut e = Enc::default();
            e.string(&path).boolean(false);
            let r = c.call(op::GET_DATA, &e.0).expect("getData");
            let data = (r.err == 0).then(|| Dec::new(&r.body).buf().expect("data"));
            let r = c.call(op::GET_CHILDREN, &e.0).expect("getChildren");
            if r.err == 0 {
                let mut d = Dec::new(&r.body);
                for _ in 0..d.int().expect("count") {
                    let name = d.string().expect("name");
                    todo.push(format!("{}/{name}", path.trim_end_matches('/')));
                }
            }
            out.push((path, data));
        }
        let _ = c.call(op::CLOSE, &[]);
        out
    }
}

/// Ready = it starts a session (`ruok` answers before the server takes sessions): a raw
/// ConnectRequest (protocol 0, zxid 0, timeout 2 s, no session, 16-byte empty password).
fn ruok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut req = Vec::new();
    req.extend_from_slice(&45i32.to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(&2000i32.to_be_bytes());
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(&16i32.to_be_bytes());
    req.extend_from_slice(&[0; 17]);
    let mut len = [0; 4];
    let ok = s.write_all(&req).is_ok() && s.read_exact(&mut len).is_ok();
    // Close the probe's session at once (closeSession, xid 1).
    let mut close = Vec::new();
    close.extend_from_slice(&8i32.to_be_bytes());
    close.extend_from_slice(&1i32.to_be_bytes());
    close.extend_from_slice(&(-11i32).to_be_bytes());
    let _ = s.write_all(&close);
    ok
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        self.stop();
    }
}
