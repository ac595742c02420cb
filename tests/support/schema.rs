//! Where the launcher's app-definition schema is (the customer's
//! `shared/reference/marathon-AppDefinition.schema.json`).

use std::path::{Path, PathBuf};

/// The customer's copy when the repository sits beside `shared/`, else the copy kept in
/// `tests/support/` (a clone anywhere, as CI makes, has no `../shared`). Where both exist
/// they must be the same file: a changed reference fails here rather than going unnoticed.
pub fn marathon_schema() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kept = root.join("tests/support/marathon-AppDefinition.schema.json");
    let shared = root.join("../shared/reference/marathon-AppDefinition.schema.json");
    if shared.is_file() {
        let same = std::fs::read(&shared).ok() == std::fs::read(&kept).ok();
        assert!(
            same,
            "{} differs from {}: copy the reference over",
            kept.display(),
            shared.display()
        );
        return shared;
    }
    assert!(kept.is_file(), "{} missing", kept.display());
    kept
}
