//! Which confirmation protocol a frontend speaks, and which client version it
//! runs: strict `ai` releases reject chunk types and keys they do not know,
//! so every chunk is fitted to the client before it is encoded.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// How a confirmation is asked and answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ConfirmationProtocol {
    /// An `adk_request_confirmation` call answered with `addToolOutput`.
    #[default]
    Adk,
    /// `tool-approval-request` answered with `addToolApprovalResponse` (ai 6+).
    AiSdk,
}

/// An `ai` package version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl ClientVersion {
    /// The newest release this server was checked against.
    pub const LATEST: ClientVersion = ClientVersion::new(7, 0, 173);

    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Native approvals (`tool-approval-request`, `tool-output-denied`) exist from 6.0.0.
    pub fn has_approvals(self) -> bool {
        self.major >= 6
    }
}

impl fmt::Display for ClientVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an ai version (expected e.g. 5.0.0, 6.0, 7)")]
pub struct BadVersion(String);

/// `7`, `7.0` and `7.0.173`; a missing part is 0.
impl FromStr for ClientVersion {
    type Err = BadVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(text.to_owned());
        let mut parts = text.trim().trim_start_matches('v').split('.');
        let mut next = |required: bool| match parts.next() {
            Some(p) => p.parse::<u32>().map_err(|_| bad()),
            None if required => Err(bad()),
            None => Ok(0),
        };
        let version = ClientVersion::new(next(true)?, next(false)?, next(false)?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(version)
    }
}

impl<'de> Deserialize<'de> for ClientVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!("7".parse(), Ok(ClientVersion::new(7, 0, 0)));
        assert_eq!("v6.0".parse(), Ok(ClientVersion::new(6, 0, 0)));
        assert_eq!("5.0.216".parse(), Ok(ClientVersion::new(5, 0, 216)));
        assert!("5.x".parse::<ClientVersion>().is_err());
        assert!("1.2.3.4".parse::<ClientVersion>().is_err());
        assert!("".parse::<ClientVersion>().is_err());
        assert!(ClientVersion::new(5, 0, 216) < ClientVersion::new(5, 1, 0));
    }
}
