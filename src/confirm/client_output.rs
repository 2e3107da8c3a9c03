//! Whether the client's result for a client-side tool counts: only for a
//! call this server handed out, and only the first result taken.

use serde_json::{Value, json};

use super::audit::Note;
use super::check::same_call;
use super::handoff::handoff_id;
use super::records::{RESULT, as_ran};
use super::{CONFIRMATION_TOOL, ClientOutput, Gate, GateError, Scope, millis, signing};
use crate::call::ToolCall;
use crate::policy::Verdict;
use crate::protocol::{ConfirmationProtocol, ToolPart, ToolState};
use crate::store::{AuditDecision, Issued, Outcome, RecordKind, Status, StoreError};
use crate::tools::client::{MAX_OUTPUT_BYTES, NO_RESULT};

impl Gate {
    /// Judges what the client says a client-side tool returned. The history
    /// is untrusted: an output counts only for a call this server handed out
    /// (the record named in the part's metadata, for this chat, principal and
    /// call), that no rule denies now, and that fits in [`MAX_OUTPUT_BYTES`].
    /// A handed-out call without a result is the error [`NO_RESULT`].
    pub async fn check_client_output(
        &self,
        scope: &Scope,
        part: &ToolPart,
    ) -> Result<ClientOutput, GateError> {
        if part.tool_name == CONFIRMATION_TOOL || !self.runs_on_client(&part.tool_name) {
            return Ok(ClientOutput::NotClient);
        }
        let size = match &part.state {
            ToolState::OutputAvailable {
                output,
                preliminary: false,
            } => output.to_string().len(),
            // An error cannot make anything happen: only its size matters.
            ToolState::OutputError { error_text } if error_text.len() <= MAX_OUTPUT_BYTES => {
                return Ok(ClientOutput::Accepted);
            }
            ToolState::OutputError { error_text } => error_text.len(),
            ToolState::InputStreaming | ToolState::InputAvailable => {
                return Ok(ClientOutput::Rejected(NO_RESULT.into()));
            }
            // Questions and denials are the answers' business.
            ToolState::OutputAvailable { .. }
            | ToolState::ApprovalRequested { .. }
            | ToolState::ApprovalResponded(_)
            | ToolState::OutputDenied(_) => return Ok(ClientOutput::NotClient),
        };
        let call = ToolCall {
            id: part.tool_call_id.clone(),
            name: part.tool_name.clone(),
            args: part.input.clone(),
        };
        let why = match self.judge_client_output(scope, &call, part, size).await? {
            None => return Ok(ClientOutput::Accepted),
            Some(why) => why,
        };
        tracing::warn!(call = %call.id, chat = %scope.chat_id, "client output refused: {why}");
        let id = handoff_id(part.call_provider_metadata.as_ref());
        let note = Note::new(AuditDecision::Refused, scope, &call).because(why.clone());
        self.note(note.on(id)).await;
        Ok(ClientOutput::Rejected(why))
    }

    /// Why a client output is not taken, if it is not.
    pub(super) async fn judge_client_output(
        &self,
        scope: &Scope,
        call: &ToolCall,
        part: &ToolPart,
        size: usize,
    ) -> Result<Option<String>, GateError> {
        if size > MAX_OUTPUT_BYTES {
            return Ok(Some(format!(
                "the client's result is larger than {MAX_OUTPUT_BYTES} bytes"
            )));
        }
        let not_handed = || {
            Some(format!(
                "no call `{}` of {} was handed to the client by this server",
                call.id, call.name
            ))
        };
        let Some(id) = handoff_id(part.call_provider_metadata.as_ref()) else {
            return Ok(not_handed());
        };
        let output = match &part.state {
            ToolState::OutputAvailable { output, .. } => Some(output),
            _ => None,
        };
        // A result taken before stands (its hand-off record may be gone),
        // as long as it is the same result.
        if let Some(output) = output
            && let Some(taken) = self.taken_result(scope, id).await?
        {
            if !same_call(call, &taken.call) {
                return Ok(Some(
                    "the call differs from the one this server handed to the client".into(),
                ));
            }
            if taken.digest != signing::digest(output) {
                return Ok(Some(
                    "the result differs from the one the client gave before".into(),
                ));
            }
            if let Some(Verdict::Deny { reason }) = self.verdict(scope, call) {
                return Ok(Some(format!("denied by policy: {reason}")));
            }
            return Ok(None);
        }
        let Some(issued) = self
            .store
            .get(id)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal)
        else {
            return Ok(not_handed());
        };
        let Some(Status::Done(outcome @ Outcome::HandedOff { .. })) = self.store.status(id).await?
        else {
            return Ok(not_handed());
        };
        if !same_call(call, &as_ran(issued.call, &outcome)) {
            return Ok(Some(
                "the call differs from the one this server handed to the client".into(),
            ));
        }
        if let Some(Verdict::Deny { reason }) = self.verdict(scope, call) {
            return Ok(Some(format!("denied by policy: {reason}")));
        }
        if let Some(output) = output {
            return self.take_result(scope, id, call, output).await;
        }
        Ok(None)
    }

    /// The result taken before for hand-off `id` in this chat, if any.
    pub(super) async fn taken_result(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<Option<Taken>, GateError> {
        let key = result_key(id);
        let Some(issued) = self
            .store
            .get(&key)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal)
        else {
            return Ok(None);
        };
        // Being recorded by a racing request: judged by the hand-off record.
        let Some(Status::Done(Outcome::Output { output, .. })) = self.store.status(&key).await?
        else {
            return Ok(None);
        };
        let digest = output
            .get("digest")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(Some(Taken {
            call: issued.call,
            digest,
        }))
    }

    /// Records the digest of the first result taken for hand-off `id`; a
    /// racing request that recorded another result first wins, and this one
    /// is refused. A store that cannot record it costs nothing now: the
    /// result was judged by its hand-off record.
    pub(super) async fn take_result(
        &self,
        scope: &Scope,
        id: &str,
        call: &ToolCall,
        output: &Value,
    ) -> Result<Option<String>, GateError> {
        let digest = signing::digest(output);
        let now = self.clock.now_ms();
        let key = result_key(id);
        let record = Issued {
            id: key.clone(),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint: format!("{}'s result from the client was taken", call.name),
            protocol: ConfirmationProtocol::Adk,
            call: call.clone(),
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.result_retention)),
            kind: RecordKind::ClientResult,
            fingerprint: None,
        };
        let (gate, taken) = (self.clone(), digest.clone());
        let recorded = self.to_the_end(async move {
            let outcome = Outcome::Output {
                output: json!({"digest": taken}),
                ran_with: None,
                responded: false,
            };
            gate.issue_closed(record, outcome).await
        });
        match recorded.await {
            Ok(()) => Ok(None),
            Err(GateError::Store(StoreError::Duplicate(_))) => {
                match self.taken_result(scope, id).await? {
                    Some(taken) if taken.digest != digest => Ok(Some(
                        "the result differs from the one the client gave before".into(),
                    )),
                    _ => Ok(None),
                }
            }
            Err(e) => {
                tracing::warn!(handoff = %id, "recording a client result failed: {e}");
                Ok(None)
            }
        }
    }
}

/// A client result taken before: the call as handed out, and the digest of
/// the result.
pub(super) struct Taken {
    call: ToolCall,
    digest: String,
}

/// The store key of the result taken for hand-off `id`.
pub(super) fn result_key(id: &str) -> String {
    format!("{id}{RESULT}")
}
