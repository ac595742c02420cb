//! Validation of the state store flags: where the state lives, framework adoption and the
//! store helpers that run instead of the scheduler.

use super::check::Check;
use super::*;
use crate::store::StoreHelper;

impl Check<'_> {
    pub(super) fn store(&mut self) -> StoreSettings {
        let mut s = self.store_location();
        // An explicit location turns off discovery through the master; adoption and the
        // helpers ride on the store settings because they act on the stored state.
        s.explicit = self.raw("store.type").is_some() || self.raw("store.uri").is_some();
        s.adopt_id = self.raw("framework.id").filter(|v| !v.is_empty());
        s.force_new = self.boolean("framework.new");
        s.skip_guard = self.raw("framework.guard").is_some() && !self.boolean("framework.guard");
        if s.adopt_id.is_some() && s.force_new {
            self.fail("framework.new", "-framework.id adopts a framework, -framework.new registers a new one: give one of them");
        }
        let yes = self.boolean("yes");
        let helpers = [
            self.boolean("store.dump").then_some(StoreHelper::Dump),
            self.boolean("store.delete")
                .then_some(StoreHelper::Delete { yes }),
            self.raw("store.import")
                .map(|p| StoreHelper::Import(p.into())),
        ];
        let mut chosen = helpers.into_iter().flatten();
        s.helper = chosen.next();
        if chosen.next().is_some() {
            self.fail(
                "store.dump",
                "give one of -store.dump, -store.delete, -store.import",
            );
        }
        s
    }

    fn store_location(&mut self) -> StoreSettings {
        let kind = match self.raw("store.type").map(|v| v.to_ascii_lowercase()) {
            None => StoreKind::File,
            Some(v) if v == "file" => StoreKind::File,
            Some(v) if v == "zookeeper" || v == "zk" => StoreKind::ZooKeeper,
            Some(v) => {
                self.fail(
                    "store.type",
                    format!("{v:?} is not a store type (file, zk)"),
                );
                StoreKind::File
            }
        };
        if kind == StoreKind::ZooKeeper {
            // Without a path in the URI each framework name gets its own node, so frameworks
            // sharing one ensemble keep apart.
            let name = self
                .raw("framework.name")
                .unwrap_or_else(|| "storage-framework".into());
            let default = format!("/storage-framework/{name}");
            let uri = match self.raw("store.uri") {
                None => {
                    self.fail(
                        "store.uri",
                        "-store.type=zk needs -store.uri=zk://host:port,.../path",
                    );
                    String::new()
                }
                Some(v) => match crate::store::zk::parse_uri(&v, &default) {
                    Ok((hosts, path)) => {
                        let auth = crate::store::zk::userinfo(&v);
                        format!("zk://{auth}{}{path}", hosts.join(","))
                    }
                    Err(e) => {
                        self.fail("store.uri", e);
                        String::new()
                    }
                },
            };
            return StoreSettings::new(kind, uri);
        }
        let uri = match self.raw("store.uri") {
            Some(v) => {
                let path = v.strip_prefix("file://").unwrap_or(&v).to_owned();
                if path.is_empty() || path.ends_with('/') {
                    self.fail("store.uri", format!("{v:?} does not name a file"));
                }
                path
            }
            None => match self.env("MESOS_SANDBOX") {
                Some(sandbox) => format!("{}/{DEFAULT_STATE_FILE}", sandbox.trim_end_matches('/')),
                None => format!("./{DEFAULT_STATE_FILE}"),
            },
        };
        StoreSettings::new(kind, uri)
    }
}
