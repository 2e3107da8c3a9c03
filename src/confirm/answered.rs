//! An answer in the chat: the decision pipeline's chat face.

use super::check::Refusal;
use super::pipeline::{Form, Reached};
use super::{Answer, Answered, Gate, GateError, Scope};
use crate::identity::{Identity, Known};

impl Gate {
    /// Checks a user's answer against what this server issued, and records
    /// the decision in the audit log: through the decision pipeline, run to
    /// its end whatever happens to the caller. The chat's user,
    /// `scope.principal`, is `known` as the chat's request said (the roles
    /// and source their identity brings).
    pub async fn check_answer(
        &self,
        scope: &Scope,
        known: &Known,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let (gate, scope, owned) = (self.clone(), scope.clone(), answer.clone());
        let who = Identity::of(scope.principal.clone(), known.clone());
        let reached = self
            .to_the_end(async move {
                let form = Form::Chat {
                    scope: &scope,
                    answer: &owned,
                    who: &who,
                };
                gate.decide_question(form, &owned.confirmation_id, &owned.decision)
                    .await
            })
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
