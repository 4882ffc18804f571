//! [`Secret`]: the one type every credential in the config is held in (upstream API
//! keys, tokens and passwords, the admin token, the JWT signing secret).
//!
//! It deserializes from a plain string (`${ENV}` substitution happens before), never
//! shows its value in `Debug` or `Display` (so a config, an error or a log line that
//! prints one prints `***`), and compares in constant time (digests of both sides, so
//! neither the first differing byte nor the length shows in the timing).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A secret string: serialized as is, never shown by `Debug` or `Display`.
#[derive(Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    /// The value, for the one place that must send or check it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this secret, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        let expected: [u8; 32] = Sha256::digest(self.0.as_bytes()).into();
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digests_equal(&expected, &presented)
    }
}

/// Whether two digests are equal, looking at every byte whatever the first
/// difference: the one constant-time comparison of credentials.
pub fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

/// Constant time, like [`Secret::matches`].
impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.matches(&other.0)
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_owned())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_shown_and_compared_whole() {
        let secret = Secret::from("hunter2-hunter2-hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{secret}"), "***");
        assert!(secret.matches("hunter2-hunter2-hunter2"));
        assert!(!secret.matches("hunter2"));
        assert_eq!(secret, Secret::from("hunter2-hunter2-hunter2".to_owned()));
        assert_ne!(secret, Secret::from("other"));
        let parsed: Secret = serde_json::from_str("\"abc\"").unwrap();
        assert_eq!(parsed.expose(), "abc");
        assert_eq!(serde_json::to_string(&parsed).unwrap(), "\"abc\"");
    }
}
