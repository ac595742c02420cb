//! Role of a node in the storage cluster (design section 3).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum Persona {
    Primary,
    Secondary,
    Tiebreaker,
    /// A plan without a persona is a data node's.
    #[default]
    Data,
}

impl Persona {
    pub const ALL: [Persona; 4] = [
        Persona::Primary,
        Persona::Secondary,
        Persona::Tiebreaker,
        Persona::Data,
    ];

    /// Runs an MDM (primary, secondary or tie-breaker).
    pub fn is_mdm(self) -> bool {
        !matches!(self, Persona::Data)
    }

    /// An MDM that manages the cluster (primary or secondary), not the tie-breaker.
    pub fn is_manager(self) -> bool {
        matches!(self, Persona::Primary | Persona::Secondary)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Persona::Primary => "primary",
            Persona::Secondary => "secondary",
            Persona::Tiebreaker => "tiebreaker",
            Persona::Data => "data",
        }
    }

    /// Its name in any case, `tie-breaker`, or the earlier framework's numbers 1 to 4.
    pub fn parse(s: &str) -> Option<Persona> {
        match s.trim().to_ascii_lowercase().as_str() {
            "primary" | "1" => Some(Persona::Primary),
            "secondary" | "2" => Some(Persona::Secondary),
            "tiebreaker" | "tie-breaker" | "3" => Some(Persona::Tiebreaker),
            "data" | "4" => Some(Persona::Data),
            _ => None,
        }
    }
}

impl fmt::Display for Persona {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persona_parses_names_and_earlier_numbers() {
        assert_eq!(Persona::parse("Primary"), Some(Persona::Primary));
        assert_eq!(Persona::parse("tie-breaker"), Some(Persona::Tiebreaker));
        assert_eq!(Persona::parse("4"), Some(Persona::Data));
        assert_eq!(Persona::parse("mdm"), None);
        for p in Persona::ALL {
            assert_eq!(Persona::parse(p.as_str()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
        }
    }
}
