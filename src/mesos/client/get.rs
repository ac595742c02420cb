//! Plain `GET` requests for JSON answers (the master's `/version`, state endpoints), small
//! ones read whole and large ones deserialized as they stream.

use super::endpoint::{classify, new_agent};
use super::{ClientConfig, ClientError, MAX_JSON_BODY};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use ureq::http::Response;

/// `GET url` and parse the body as JSON (at most 1 MiB), with the client's timeouts.
pub fn get_json(url: &str, config: &ClientConfig) -> Result<serde_json::Value, ClientError> {
    get_json_with(&new_agent(config), url, MAX_JSON_BODY)
}

/// `GET url` and deserialize the body as `T` while it is read (at most `max_bytes`): the
/// body is never held whole, so a type that keeps only what it needs (unknown fields are
/// skipped) costs what it keeps, not the size of the body. For answers that grow with the
/// cluster (`/master/slaves` is megabytes at 10,000 agents).
pub fn get_json_streamed<T: DeserializeOwned>(
    url: &str,
    config: &ClientConfig,
    max_bytes: u64,
) -> Result<T, ClientError> {
    let (endpoint, response) = get_ok(&new_agent(config), url)?;
    let reader = response
        .into_body()
        .into_with_config()
        .limit(max_bytes)
        .reader();
    serde_json::from_reader(std::io::BufReader::with_capacity(16 * 1024, reader)).map_err(|e| {
        if e.is_io() {
            ClientError::Transport(format!("{endpoint}: reading the body: {e}"))
        } else {
            ClientError::Protocol {
                endpoint,
                detail: format!("unexpected body: {e}"),
            }
        }
    })
}

/// `GET url` asking for JSON: the endpoint (for errors) and the response, when it is a 200.
fn get_ok(agent: &ureq::Agent, url: &str) -> Result<(String, Response<ureq::Body>), ClientError> {
    let endpoint = format!("GET {url}");
    log::debug!("{endpoint}");
    let response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| ClientError::Transport(format!("{endpoint}: {e}")))?;
    if response.status().as_u16() != 200 {
        return Err(classify(endpoint, response, "200 with a JSON body"));
    }
    Ok((endpoint, response))
}

pub(super) fn get_json_with(
    agent: &ureq::Agent,
    url: &str,
    max_bytes: u64,
) -> Result<serde_json::Value, ClientError> {
    let (endpoint, response) = get_ok(agent, url)?;
    let body = response
        .into_body()
        .into_with_config()
        .limit(max_bytes)
        .read_to_vec()
        .map_err(|e| ClientError::Transport(format!("{endpoint}: reading the body: {e}")))?;
    serde_json::from_slice(&body).map_err(|e| ClientError::Protocol {
        endpoint,
        detail: format!("body is not JSON: {e}"),
    })
}

/// The master's `GET /version` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterVersion {
    /// e.g. `1.4.0`.
    pub version: String,
    #[serde(default)]
    pub git_sha: Option<String>,
    #[serde(default)]
    pub git_tag: Option<String>,
    #[serde(default)]
    pub build_date: Option<String>,
}

impl MasterVersion {
    /// `(major, minor, patch)` of `version`; a pre-release suffix (`1.10.0-rc1`) is ignored
    /// and a missing patch counts as 0.
    pub fn numbers(&self) -> Result<(u32, u32, u32), String> {
        let core = self.version.trim().split(['-', '+']).next().unwrap_or("");
        let mut parts = core.split('.');
        let mut next = |what: &str, required: bool| -> Result<u32, String> {
            match parts.next() {
                Some(p) => p.parse::<u32>().map_err(|_| {
                    format!("master version {:?}: {what} is not a number", self.version)
                }),
                None if required => Err(format!(
                    "master version {:?} lacks the {what}",
                    self.version
                )),
                None => Ok(0),
            }
        };
        let major = next("major", true)?;
        let minor = next("minor", true)?;
        let patch = next("patch", false)?;
        Ok((major, minor, patch))
    }

    /// Whether this master is at least `major.minor`.
    pub fn at_least(&self, major: u32, minor: u32) -> Result<bool, String> {
        let (ma, mi, _) = self.numbers()?;
        Ok((ma, mi) >= (major, minor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_version_numbers() {
        let v = |s: &str| MasterVersion {
            version: s.into(),
            git_sha: None,
            git_tag: None,
            build_date: None,
        };
        assert_eq!(v("1.4.0").numbers(), Ok((1, 4, 0)));
        assert_eq!(v("1.10.2-rc1").numbers(), Ok((1, 10, 2)));
        assert_eq!(v("2.0").numbers(), Ok((2, 0, 0)));
        assert!(v("1").numbers().is_err());
        assert!(v("one.two").numbers().is_err());
        assert_eq!(v("0.28.2").at_least(1, 0), Ok(false));
        assert_eq!(v("1.0.0").at_least(1, 0), Ok(true));
    }
}
