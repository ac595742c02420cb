//! Package downloads into the sandbox: `http://` (with a timeout, the HTTP status and the
//! announced size checked) or `file://` (a copy, for packages staged on a shared disk).
//! This build has no TLS: an `https://` URL is refused with a message saying so.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// Larger than any storage package (the gateway is about 100 MB).
const MAX_SIZE: u64 = 2 << 30;

/// The file name a URL names (its last path segment, query and fragment removed).
pub fn file_name(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?;
    let name = path.rsplit('/').next()?;
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '~'));
    ok.then(|| name.to_string())
}

/// Downloads `url` into `dir` and returns the file's path.
pub fn fetch(url: &str, dir: &Path) -> Result<PathBuf, String> {
    let name = file_name(url).ok_or_else(|| format!("{url}: the URL names no usable file"))?;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dest = dir.join(&name);
    let partial = dir.join(format!("{name}.part"));
    let written = if let Some(path) = url.strip_prefix("file://") {
        fs::copy(path, &partial).map_err(|e| format!("{url}: cannot copy {path}: {e}"))?
    } else if url.starts_with("http://") {
        http_get(url, &partial)?
    } else if url.starts_with("https://") {
        return Err(format!(
            "{url}: this executor build has no TLS; serve the packages over http:// or file://"
        ));
    } else {
        return Err(format!("{url}: not an http:// or file:// URL"));
    };
    if written == 0 {
        let _ = fs::remove_file(&partial);
        return Err(format!("{url}: the download is empty"));
    }
    fs::rename(&partial, &dest).map_err(|e| format!("cannot move {}: {e}", dest.display()))?;
    Ok(dest)
}

/// [`fetch`], then checks the file against `sha256` (hex) when one is given; a mismatch
/// removes the file and names it with both digests.
pub fn fetch_verified(url: &str, sha256: Option<&str>, dir: &Path) -> Result<PathBuf, String> {
    let path = fetch(url, dir)?;
    if let Some(want) = sha256 {
        let got = crate::sha256::file_hex(&path)?;
        if !got.eq_ignore_ascii_case(want) {
            let _ = fs::remove_file(&path);
            return Err(format!(
                "{}: SHA-256 mismatch: downloaded {got}, expected {} (from {url})",
                path.file_name().unwrap_or_default().to_string_lossy(),
                want.to_ascii_lowercase()
            ));
        }
    }
    Ok(path)
}

fn http_get(url: &str, dest: &Path) -> Result<u64, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_global(Some(DOWNLOAD_TIMEOUT))
        .build()
        .into();
    let response = agent.get(url).call().map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("{url}: HTTP status {status}"));
    }
    let announced: Option<u64> = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let mut reader = response.into_body().into_reader().take(MAX_SIZE + 1);
    let mut file = fs::File::create(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| format!("{url}: reading the body: {e}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_SIZE {
            return Err(format!("{url}: larger than {MAX_SIZE} bytes"));
        }
        file.write_all(&buf[..n])
            .map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    file.sync_all()
        .map_err(|e| format!("{}: {e}", dest.display()))?;
    if let Some(len) = announced.filter(|len| *len != total) {
        return Err(format!(
            "{url}: got {total} bytes of the {len} announced (cut short)"
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_plain() {
        assert_eq!(
            file_name("http://r/x/EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm?x=1").as_deref(),
            Some("EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm")
        );
        assert_eq!(file_name("http://r/dir/"), None);
        assert_eq!(file_name("http://r/a b.deb"), None);
        assert_eq!(file_name("http://r/.."), None);
    }

    #[test]
    fn file_urls_are_copied_and_bad_ones_named() {
        let dir = std::env::temp_dir().join(format!("executor-dl-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("src-pkg_1.0_amd64.deb");
        fs::write(&src, b"package").unwrap();
        let out = dir.join("out");
        let got = fetch(&format!("file://{}", src.display()), &out).unwrap();
        assert_eq!(fs::read(&got).unwrap(), b"package");
        let empty = dir.join("empty_1.0_amd64.deb");
        fs::write(&empty, b"").unwrap();
        let e = fetch(&format!("file://{}", empty.display()), &out).unwrap_err();
        assert!(e.contains("empty"), "{e}");
        let e = fetch("https://example.invalid/x.deb", &out).unwrap_err();
        assert!(e.contains("no TLS"), "{e}");
        let e = fetch("ftp://example.invalid/x.deb", &out).unwrap_err();
        assert!(e.contains("not an http"), "{e}");
        // Checked against a digest: a match passes, a mismatch names the file and both.
        let url = format!("file://{}", src.display());
        let right = crate::sha256::hex(b"package");
        fetch_verified(&url, Some(&right.to_uppercase()), &out).unwrap();
        let wrong = "0".repeat(64);
        let e = fetch_verified(&url, Some(&wrong), &out).unwrap_err();
        assert!(
            e.contains("src-pkg_1.0_amd64.deb") && e.contains(&right) && e.contains(&wrong),
            "{e}"
        );
        assert!(
            !out.join("src-pkg_1.0_amd64.deb").exists(),
            "a bad download is removed"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
