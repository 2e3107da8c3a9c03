//! How a client-side tool's call is handed to the client: the record its
//! result must name later.

use serde_json::Value;

use super::{Gate, GateError, Scope, millis};
use crate::call::ToolCall;
use crate::protocol::ConfirmationProtocol;
use crate::store::{Issued, Outcome, RecordKind};

impl Gate {
    /// Records an allowed call of a client-side tool as handed out (a
    /// record the client's result must name), and returns the record's id.
    pub(super) async fn record_hand_off(
        &self,
        scope: &Scope,
        call: &ToolCall,
        protocol: ConfirmationProtocol,
    ) -> Result<String, GateError> {
        let now = self.clock.now_ms();
        let issued = Issued {
            id: self.ids.next(HANDOFF),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint: format!("{} was handed to the client", call.name),
            protocol,
            call: call.clone(),
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.expiry)),
            kind: RecordKind::HandOff,
            fingerprint: None,
        };
        let id = issued.id.clone();
        let handed = Outcome::HandedOff { ran_with: None };
        self.issue_closed(issued, handed).await?;
        Ok(id)
    }
}

/// The hand-off record a client's result names (`toolgate.handoff` in the
/// part's `callProviderMetadata`).
pub fn handoff_id(metadata: Option<&Value>) -> Option<&str> {
    metadata?.get("toolgate")?.get("handoff")?.as_str()
}

/// `metadata` with `toolgate.handoff` set to `id`, the rest kept (a seal,
/// a provider's own).
pub fn with_handoff(metadata: Option<Value>, id: &str) -> Value {
    let mut metadata = match metadata {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let toolgate = metadata
        .entry("toolgate")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !toolgate.is_object() {
        *toolgate = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(toolgate) = toolgate {
        toolgate.insert("handoff".into(), Value::String(id.to_owned()));
    }
    Value::Object(metadata)
}

/// The id prefix of a hand-off record.
pub(super) const HANDOFF: &str = "handoff";
