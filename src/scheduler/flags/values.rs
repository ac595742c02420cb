//! Judging one flag value as text: Go's booleans and the placeholders of the spec's examples.
//! A leaf under both the scan of the arguments and the checks of their values.

/// A flag's value and how the operator spelled the flag (for error messages).
pub(super) struct Given {
    pub(super) written: String,
    pub(super) value: String,
}

/// Go's strconv.ParseBool, which the earlier framework's flags used.
pub(super) fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Text of the first unreplaced placeholder in `v`: `<...>`, `[...]` or `{...}` holding words
/// (letters, digits, space, `_ - . / |`), as in the spec's `<GATEWAY_PASSWORD>`,
/// `[MASTER MDM IP ADDRESS]` and `{custom_binary_url}`. An IPv6 literal such as `[::1]` holds
/// colons, so it is not mistaken for one.
pub(super) fn find_placeholder(v: &str) -> Option<&str> {
    for (open, close) in [('<', '>'), ('[', ']'), ('{', '}')] {
        let mut from = 0;
        while let Some(start) = v[from..].find(open).map(|s| s + from) {
            let inner_start = start + open.len_utf8();
            let Some(len) = v[inner_start..].find(close) else {
                break;
            };
            let inner = &v[inner_start..inner_start + len];
            if is_placeholder_words(inner) {
                return Some(&v[start..inner_start + len + close.len_utf8()]);
            }
            from = inner_start;
        }
    }
    None
}

fn is_placeholder_words(inner: &str) -> bool {
    !inner.trim().is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " _-./|".contains(c))
}

/// A password is only a placeholder when the whole value is one: `Pa[1]ss` is a password.
pub(super) fn is_whole_placeholder(v: &str) -> bool {
    let v = v.trim();
    [('<', '>'), ('[', ']'), ('{', '}')].iter().any(|&(o, c)| {
        v.len() >= 2
            && v.starts_with(o)
            && v.ends_with(c)
            && is_placeholder_words(&v[1..v.len() - 1])
    })
}
