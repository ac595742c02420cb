//! README's flag reference is `storage-scheduler -help`, from its `Usage` line on; this test
//! keeps the two equal. `UPDATE_README=1 cargo test --test readme` rewrites the block.

use std::process::Command;

const BEGIN: &str = "<!-- flags:begin -->\n```text\n";
const END: &str = "```\n<!-- flags:end -->";

#[test]
fn readme_flag_reference_is_the_help_text() {
    let out = Command::new(env!("CARGO_BIN_EXE_storage-scheduler"))
        .arg("-help")
        .output()
        .expect("storage-scheduler -help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("utf-8");
    // The first line names the build (tag and commit), which a README cannot follow.
    let from = help.find("Usage:").expect("a Usage line in -help");
    let help = help[from..].trim_end();

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).expect("README.md");
    let start = readme.find(BEGIN).expect("flags:begin marker in README") + BEGIN.len();
    let end = start
        + readme[start..]
            .find(END)
            .expect("flags:end marker in README");
    let block = readme[start..end].trim_end();
    if block != help && std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{help}\n{}", &readme[..start], &readme[end..]);
        std::fs::write(path, updated).expect("write README.md");
        return;
    }
    assert!(
        block == help,
        "README's flag reference differs from `storage-scheduler -help`; \
         rerun with UPDATE_README=1 to rewrite it.\n--- README\n{block}\n--- -help\n{help}"
    );
}
