//! Which confirmation protocol a frontend speaks, and which client version it
//! runs: strict `ai` releases reject chunk types and keys they do not know,
//! so every chunk is fitted to the client before it is encoded.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use super::chunk::{FinishReason, ToolExtras, UiChunk};

/// How a confirmation is asked and answered.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ConfirmationProtocol {
    /// An `adk_request_confirmation` call answered with `addToolOutput`.
    #[default]
    Adk,
    /// `tool-approval-request` answered with `addToolApprovalResponse` (ai 6+).
    AiSdk,
}

/// What a turn does once it asked.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ConfirmationFlow {
    /// Finish (`tool-calls`); the answer comes with the next request.
    #[default]
    Finish,
    /// Keep the stream open until each question is decided (through the
    /// approvals API or a socket's `confirm` frame) or times out, then go on.
    Hold,
}

/// How a call denied through a native approval (`toolConfirmation.protocol:
/// ai-sdk`) ends on the wire. ADK confirmations always end a denied call as
/// `tool-output-error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DeniedAs {
    /// `tool-output-denied`: the part goes to `output-denied`, its approval kept.
    #[default]
    OutputDenied,
    /// `tool-output-error` with the denial text the model reads, for clients
    /// that render only errors.
    OutputError,
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
        self >= V6_0_0
    }

    /// Releases whose schemas reject every key they do not declare.
    fn strict(self) -> bool {
        self <= ClientVersion::new(5, 0, 216)
            || (V6_0_0 <= self && self <= ClientVersion::new(6, 0, 230))
            || (V7_0_0 <= self && self <= ClientVersion::new(7, 0, 31))
    }

    /// Whether an optional key declared from `since` on is accepted. Loose
    /// releases ignore keys they do not know; every key toolgate may emit is
    /// declared by 7.0.0, so the 6.x and 7.x lines agree.
    fn accepts(self, since: ClientVersion) -> bool {
        !self.strict() || self >= since
    }

    /// Whether every client version takes `chunk` as toolgate makes it, so
    /// it needs no [`ClientVersion::fit`]: the deltas and block bounds that
    /// are nearly all of a turn's chunks (a test holds `fit` to that).
    pub fn takes_as_is(chunk: &UiChunk) -> bool {
        matches!(
            chunk,
            UiChunk::TextDelta { .. }
                | UiChunk::ReasoningDelta { .. }
                | UiChunk::TextStart { .. }
                | UiChunk::TextEnd { .. }
                | UiChunk::ReasoningStart { .. }
                | UiChunk::ReasoningEnd { .. }
                | UiChunk::ToolInputDelta { .. }
                | UiChunk::StartStep
                | UiChunk::FinishStep
        )
    }

    /// The chunks that say `chunk` to this client: keys it would reject are
    /// dropped, and a chunk type it lacks is said with older ones. Every
    /// version boundary here was read off that release's own schema.
    pub fn fit(self, chunk: UiChunk) -> impl Iterator<Item = UiChunk> {
        // Even loose releases reject a chunk type they do not know.
        let type_since = match &chunk {
            UiChunk::ToolApprovalResponse { .. }
            | UiChunk::Custom { .. }
            | UiChunk::ReasoningFile { .. } => Some(V7_0_0),
            UiChunk::ResetStep => Some(ClientVersion::new(7, 0, 70)),
            UiChunk::SteeringMessage { .. } => Some(ClientVersion::new(7, 0, 163)),
            _ => None,
        };
        if type_since.is_some_and(|since| self < since) {
            return [None, None].into_iter().flatten();
        }
        let mut second = None;
        let first = match chunk {
            UiChunk::Finish {
                finish_reason,
                message_metadata,
            } => UiChunk::Finish {
                finish_reason: finish_reason
                    .filter(|_| self.accepts(ClientVersion::new(5, 0, 92)))
                    .map(|reason| match reason {
                        FinishReason::Interrupted if self < ClientVersion::new(7, 0, 149) => {
                            FinishReason::Other
                        }
                        reason => reason,
                    }),
                message_metadata,
            },
            UiChunk::Abort { reason } => UiChunk::Abort {
                reason: reason.filter(|_| self.accepts(ClientVersion::new(6, 0, 15))),
            },
            UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
                extras,
            } => {
                let extras = self.tool_extras(extras, ClientVersion::new(6, 0, 39));
                UiChunk::ToolInputStart {
                    tool_call_id,
                    tool_name,
                    extras,
                }
            }
            UiChunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
                extras,
            } => {
                let extras = self.tool_extras(extras, ClientVersion::new(5, 0, 0));
                UiChunk::ToolInputAvailable {
                    tool_call_id,
                    tool_name,
                    input,
                    extras,
                }
            }
            UiChunk::ToolInputError {
                tool_call_id,
                tool_name,
                input,
                error_text,
                extras,
            } => {
                let extras = self.tool_extras(extras, ClientVersion::new(5, 0, 0));
                if self < ClientVersion::new(5, 0, 7) {
                    // Before `tool-input-error`: the input, then the error.
                    second = Some(UiChunk::tool_error(&tool_call_id, error_text));
                    UiChunk::ToolInputAvailable {
                        tool_call_id,
                        tool_name,
                        input,
                        extras,
                    }
                } else {
                    UiChunk::ToolInputError {
                        tool_call_id,
                        tool_name,
                        input,
                        error_text,
                        extras,
                    }
                }
            }
            UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
                provider_executed,
                provider_metadata,
                dynamic,
                preliminary,
            } => UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
                provider_executed,
                provider_metadata: provider_metadata
                    .filter(|_| self.accepts(ClientVersion::new(6, 0, 120))),
                dynamic,
                preliminary: preliminary.filter(|_| self.accepts(ClientVersion::new(5, 0, 11))),
            },
            UiChunk::ToolOutputError {
                tool_call_id,
                error_text,
                provider_executed,
                provider_metadata,
                dynamic,
            } => UiChunk::ToolOutputError {
                tool_call_id,
                error_text,
                provider_executed,
                provider_metadata: provider_metadata
                    .filter(|_| self.accepts(ClientVersion::new(6, 0, 120))),
                dynamic,
            },
            // Every other chunk, with every key toolgate gives it, parses in every version;
            // approval chunks are only sent to ai 6+ (the transport refuses the rest).
            chunk @ (UiChunk::Start { .. }
            | UiChunk::StartStep
            | UiChunk::FinishStep
            | UiChunk::Error { .. }
            | UiChunk::MessageMetadata { .. }
            | UiChunk::TextStart { .. }
            | UiChunk::TextDelta { .. }
            | UiChunk::TextEnd { .. }
            | UiChunk::ReasoningStart { .. }
            | UiChunk::ReasoningDelta { .. }
            | UiChunk::ReasoningEnd { .. }
            | UiChunk::ToolInputDelta { .. }
            | UiChunk::ToolApprovalRequest { .. }
            | UiChunk::ToolOutputDenied { .. }
            | UiChunk::SourceUrl { .. }
            | UiChunk::SourceDocument { .. }
            | UiChunk::File { .. }
            | UiChunk::ToolApprovalResponse { .. }
            | UiChunk::Custom { .. }
            | UiChunk::ReasoningFile { .. }
            | UiChunk::ResetStep
            | UiChunk::SteeringMessage { .. }
            | UiChunk::Data(_)) => chunk,
        };
        [Some(first), second].into_iter().flatten()
    }

    /// `title` from 6.0.0; `providerMetadata` from `metadata_since`.
    fn tool_extras(self, extras: ToolExtras, metadata_since: ClientVersion) -> ToolExtras {
        ToolExtras {
            provider_metadata: extras
                .provider_metadata
                .filter(|_| self.accepts(metadata_since)),
            title: extras.title.filter(|_| self.accepts(V6_0_0)),
            ..extras
        }
    }
}

const V6_0_0: ClientVersion = ClientVersion::new(6, 0, 0);
const V7_0_0: ClientVersion = ClientVersion::new(7, 0, 0);

impl fmt::Display for ClientVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an ai version (expected e.g. 7.0.173, 6.0, 7 or 6.0.0-beta.148)")]
pub struct BadVersion(String);

/// `7`, `7.0` and `7.0.173` (a missing part is 0), with an optional `v`;
/// and a semver pre-release or build of a whole version,
/// `6.0.0-beta.148` or `7.0.0+sha.1`, fitted as the release it precedes:
/// the schema of ai 6.0.0-beta.148 accepts every chunk ai 6.0.0 does (one
/// more `finishReason` besides), and the conformance suite drives it.
impl FromStr for ClientVersion {
    type Err = BadVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(text.to_owned());
        let trimmed = text.trim();
        let version = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let (version, build) = match version.split_once('+') {
            Some((version, build)) => (version, Some(build)),
            None => (version, None),
        };
        let (core, pre_release) = match version.split_once('-') {
            Some((core, pre_release)) => (core, Some(pre_release)),
            None => (version, None),
        };
        let identifiers_fit = |dotted: &str, numbers_without_zeros: bool| {
            dotted.split('.').all(|id| {
                let numeric = id.bytes().all(|b| b.is_ascii_digit());
                !id.is_empty()
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !(numbers_without_zeros && numeric && id.len() > 1 && id.starts_with('0'))
            })
        };
        if pre_release.is_some_and(|p| !identifiers_fit(p, true))
            || build.is_some_and(|b| !identifiers_fit(b, false))
        {
            return Err(bad());
        }
        let numbers: Vec<&str> = core.split('.').collect();
        // A pre-release or build belongs to a whole version only.
        let whole = numbers.len() == 3;
        if numbers.len() > 3 || (!whole && (pre_release.is_some() || build.is_some())) {
            return Err(bad());
        }
        let number = |i: usize| match numbers.get(i) {
            None => Ok(0),
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                n.parse::<u32>().map_err(|_| bad())
            }
            Some(_) => Err(bad()),
        };
        Ok(ClientVersion::new(number(0)?, number(1)?, number(2)?))
    }
}

impl<'de> Deserialize<'de> for ClientVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
