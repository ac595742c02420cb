//! Release identity of both binaries: the tag and commit `scripts/build-release.sh` passes in
//! at compile time (`STORAGE_RELEASE_TAG`, `STORAGE_RELEASE_COMMIT`), so a binary fetched from
//! a release location can say which release it is. A plain `cargo build` is a development
//! build: the crate version with `-dev`, commit `unknown`.
//!
//! Lives in the library without a feature gate so the executor (default features off) prints
//! the same identity as the scheduler it was released with.

/// `v<major>.<minor>.<patch>` for a release (deployment-spec section 9), else `v<crate>-dev`.
pub const TAG: &str = match option_env!("STORAGE_RELEASE_TAG") {
    Some(tag) => tag,
    None => concat!("v", env!("CARGO_PKG_VERSION"), "-dev"),
};

/// The git commit the release was built from; `unknown` outside `build-release.sh`.
pub const COMMIT: &str = match option_env!("STORAGE_RELEASE_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// What `-version` prints: `<program> <tag> (commit <commit>)`.
pub fn line(program: &str) -> String {
    format!("{program} {TAG} (commit {COMMIT})")
}

/// True for the spellings of the version flag both binaries accept (Go `flag` style).
pub fn is_version_flag(arg: &str) -> bool {
    matches!(arg, "-version" | "--version")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_names_program_tag_and_commit() {
        let l = line("storage-executor");
        assert_eq!(l, format!("storage-executor {TAG} (commit {COMMIT})"));
        assert!(TAG.starts_with('v'), "{TAG}");
        assert!(!COMMIT.is_empty());
    }
}
