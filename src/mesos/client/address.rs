//! Master and agent addresses: `host:port` checked and turned into a base URL, and the
//! leading master read from a redirect's `Location`.

use super::ClientError;

/// `host:port` of the leading master from a redirect's `Location`, which Mesos writes as
/// `//host:port/master/api/v1/scheduler`; absolute `http(s)://host:port/...` is accepted too.
pub fn parse_leader(location: &str) -> Result<String, String> {
    let loc = location.trim();
    let lower = loc.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &loc[5..]
    } else if lower.starts_with("https://") {
        &loc[6..]
    } else {
        loc
    };
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(format!("{loc:?} names no host (expected //host:port/...)"));
    };
    let authority = rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .rsplit('@')
        .next()
        .unwrap_or("");
    check_authority(authority).map_err(|why| format!("{loc:?}: {why}"))?;
    Ok(authority.to_string())
}

fn check_authority(authority: &str) -> Result<(), String> {
    if authority.is_empty() {
        return Err("empty host".into());
    }
    if authority
        .bytes()
        .any(|b| !b.is_ascii_graphic() || matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\'))
    {
        return Err(format!("{authority:?} is not host[:port]"));
    }
    // The port is whatever follows the last ':' outside an IPv6 literal's brackets.
    let port = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => Some(&authority[i + 1..]),
        _ => None,
    };
    if let Some(port) = port {
        if port.parse::<u16>().is_err() {
            return Err(format!("{authority:?} has an invalid port {port:?}"));
        }
    }
    if authority.starts_with(':') {
        return Err(format!("{authority:?} has no host before the port"));
    }
    Ok(())
}

/// `http://host:port` from `host:port` or `http://host:port[/]`: the one place a master
/// address becomes a URL.
pub fn base_url(address: &str) -> Result<String, ClientError> {
    let invalid = |reason: String| ClientError::InvalidAddress {
        address: address.to_string(),
        reason,
    };
    let trimmed = address.trim();
    let rest = if trimmed
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
    {
        &trimmed[7..]
    } else if let Some(i) = trimmed.find("://") {
        return Err(invalid(format!(
            "scheme {:?} is not supported; give host:port (plain HTTP)",
            &trimmed[..i]
        )));
    } else {
        trimmed
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    check_authority(authority).map_err(invalid)?;
    Ok(format!("http://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_from_protocol_relative_location() {
        assert_eq!(
            parse_leader("//10.0.0.7:5050/master/api/v1/scheduler").as_deref(),
            Ok("10.0.0.7:5050")
        );
        assert_eq!(
            parse_leader(" //master-2.example:5050/master/api/v1/scheduler ").as_deref(),
            Ok("master-2.example:5050")
        );
    }

    #[test]
    fn leader_from_absolute_location() {
        assert_eq!(
            parse_leader("http://10.0.0.8:5050/master/api/v1/scheduler").as_deref(),
            Ok("10.0.0.8:5050")
        );
        assert_eq!(
            parse_leader("HTTPS://m3:5051/x?y#z").as_deref(),
            Ok("m3:5051")
        );
        assert_eq!(parse_leader("//[::1]:5050/").as_deref(), Ok("[::1]:5050"));
        assert_eq!(parse_leader("//m4:5050").as_deref(), Ok("m4:5050"));
    }

    #[test]
    fn unusable_locations_are_errors() {
        for bad in [
            "/master/api/v1/scheduler",
            "",
            "//",
            "///master",
            "//:5050/x",
            "//host:50x0/x",
            "//host:99999/x",
            "http:/host:5050/",
            "//ho st:5050/",
        ] {
            let err = parse_leader(bad).expect_err(bad);
            assert!(!err.is_empty(), "{bad}");
        }
    }

    #[test]
    fn addresses_normalise_to_a_base_url() {
        assert_eq!(base_url("m1:5050").unwrap(), "http://m1:5050");
        assert_eq!(base_url(" http://m1:5050/ ").unwrap(), "http://m1:5050");
        assert_eq!(
            base_url("HTTP://10.0.0.1:5051").unwrap(),
            "http://10.0.0.1:5051"
        );
        for bad in [
            "zk://zk1:2181/mesos",
            "https://m1:5050",
            "",
            "m1:5050/master",
            "m1:x",
        ] {
            match base_url(bad) {
                Err(ClientError::InvalidAddress { address, reason }) => {
                    assert_eq!(address, bad);
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }
}
