//! An answer in the chat: the decision pipeline's chat face.

use super::check::Refusal;
use super::pipeline::{Form, Reached};
use super::{Answer, Answered, Gate, GateError, Scope};

impl Gate {
    /// Checks a user's answer against what this server issued, and records
    /// the decision in the audit log.
    pub async fn check_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let (gate, scope, answer) = (self.clone(), scope.clone(), answer.clone());
        self.to_the_end(async move { gate.answer(&scope, &answer).await })
            .await
    }

    /// An answer in the chat, through the decision pipeline.
    pub(super) async fn answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let form = Form::Chat { scope, answer };
        let reached = self
            .decide_question(form, &answer.confirmation_id, &answer.decision)
            .await?;
        Ok(match reached {
            Reached::Won { answered, .. } => answered,
            Reached::Earlier { call, outcome } => Answered::Recorded { call, outcome },
            Reached::Refused { why, .. } => Answered::Rejected(why),
            // Only a decision out of band looks for a question it may see.
            Reached::NotFound => {
                let refusal = Refusal::NotIssued(answer.confirmation_id.clone());
                Answered::Rejected(refusal.to_string())
            }
        })
    }
}
