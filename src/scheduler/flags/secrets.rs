//! Secrets from a flag, a file or the environment, checked without ever echoing the value.

use super::check::Check;
use super::values::is_whole_placeholder;
use crate::secret::Secret;

/// The three ways a secret may be given, and what it is (for messages).
#[derive(Clone, Copy)]
pub(super) struct SecretFlag {
    pub(super) name: &'static str,
    pub(super) file: &'static str,
    pub(super) env: &'static str,
    pub(super) what: &'static str,
}

/// Longest password file accepted: a password, not a document.
const MAX_PASSWORD_FILE: u64 = 4096;

/// The password in `path`: one trailing newline (`\n` or `\r\n`) is not part of it.
fn read_password_file(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("no path given".into());
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path:?} is not a regular file"));
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{path:?} has mode {mode:04o}: group and others may read or change it; \
             make it the owner's alone (chmod 600 {path})"
        ));
    }
    if meta.len() > MAX_PASSWORD_FILE {
        return Err(format!(
            "{path:?} is {} bytes; a password file holds at most {MAX_PASSWORD_FILE}",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{path:?} is not UTF-8 text"))?;
    let text = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err(format!("{path:?} is empty"));
    }
    Ok(text.to_owned())
}

impl Check<'_> {
    /// A secret from `-<name>`, else `-<file>`, else the environment variable: `None` when
    /// none is given (an error only when `required`) or on an error. Like
    /// [`Check::required`], but no message ever contains the value.
    pub(super) fn secret(&mut self, f: &SecretFlag, required: bool) -> Option<Secret> {
        let SecretFlag {
            name,
            file,
            env,
            what,
        } = *f;
        let value = match (self.given.get(name), self.given.get(file)) {
            (Some(_), Some(_)) => {
                let other = self.label(file);
                self.fail(
                    name,
                    format!("give the password once: {other} is given too"),
                );
                return None;
            }
            (Some(g), None) => {
                self.warnings.push(format!(
                    "{} is given as a plain flag value, which every user of this host sees in \
                     the process list; give it in a file (-{file}=<path>, mode 0600) or in the \
                     environment variable {env}",
                    self.label(name)
                ));
                g.value.clone()
            }
            (None, Some(g)) => {
                let path = g.value.trim().to_owned();
                return match read_password_file(&path) {
                    Ok(p) => Some(Secret::new(p)),
                    Err(e) => {
                        self.fail(file, e);
                        None
                    }
                };
            }
            (None, None) => match (self.env)(env) {
                Some(v) if !v.is_empty() => return Some(Secret::new(v)),
                Some(_) => {
                    self.errors
                        .push(format!("{env}: the environment variable is empty"));
                    return None;
                }
                None => {
                    if required && !self.broken.contains(name) && !self.broken.contains(file) {
                        self.fail(
                            name,
                            format!(
                                "required flag is missing (or give -{file}=<path>, or set {env})"
                            ),
                        );
                    }
                    return None;
                }
            },
        };
        if is_whole_placeholder(&value) {
            self.fail(
                name,
                format!(
                    "the value is still the placeholder from the example; replace it with {what}"
                ),
            );
            return None;
        }
        // Not trimmed: spaces may be part of a password.
        if value.is_empty() {
            self.fail(name, "must not be empty");
            return None;
        }
        Some(Secret::new(value))
    }

    /// The operator token: from `-rest.operator.token.file`, else `STORAGE_OPERATOR_TOKEN`;
    /// never a plain flag value (the process list would show it). `None`: operator writes
    /// answer 403. A token shorter than 16 characters is refused: it guards root on every
    /// agent.
    pub(super) fn operator_token(&mut self) -> Option<Secret> {
        const FLAG: &str = "rest.operator.token.file";
        const ENV: &str = "STORAGE_OPERATOR_TOKEN";
        let (token, source) = match self.given.get(FLAG) {
            Some(g) => match read_password_file(g.value.trim()) {
                Ok(t) => (t, format!("-{FLAG}")),
                Err(e) => {
                    self.fail(FLAG, e);
                    return None;
                }
            },
            None => match (self.env)(ENV) {
                Some(v) if !v.is_empty() => (v, ENV.to_string()),
                Some(_) => {
                    self.errors
                        .push(format!("{ENV}: the environment variable is empty"));
                    return None;
                }
                None => return None,
            },
        };
        if token.chars().count() < 16 || token.chars().any(char::is_whitespace) {
            let problem = format!(
                "the operator token from {source} must be at least 16 characters without spaces \
                 (e.g. `head -c 32 /dev/urandom | base64 -w0`)"
            );
            if source == ENV {
                self.errors.push(problem);
            } else {
                self.fail(FLAG, problem);
            }
            return None;
        }
        Some(Secret::new(token))
    }
}
