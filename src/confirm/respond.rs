//! A person's answer in the tool's place (`decision: "respond"`): judged
//! like an approval by the decision pipeline (`admit.rs`), it wins the
//! claim the same way, and then its output is recorded as the call's
//! result (`pipeline/mod.rs`). The tool never runs: nothing reaches
//! `execute.rs`.

use serde_json::Value;

use super::Gate;
#[cfg(test)]
use super::{admit, check::Refusal};

impl Gate {
    /// The output schema of `tool`, which a response must fit
    /// ([`admit::fits`]), if it declares one (a tool now gone does not).
    pub(super) fn output_schema(&self, tool: &str) -> Option<Value> {
        self.tools
            .current()
            .get(tool)
            .and_then(|t| t.output_schema())
    }

    /// Whether `output` may stand as the result of a call of `tool`.
    #[cfg(test)]
    fn response_fits(&self, tool: &str, output: &Value) -> Result<(), Refusal> {
        let schema = self.output_schema(tool);
        admit::fits(self.upstream, tool, output, schema.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::super::check::Refusal;
    use super::super::{Decision, Gate, NewCall, OutOfBand, Scope};
    use crate::call::ToolCall;
    use crate::ids::{Clock, Ids};
    use crate::protocol::ConfirmationProtocol;
    use crate::store::{Outcome, Store};
    use crate::tools::{Registry, Tool, ToolContext, ToolError};

    /// A tool that asks, declares the schema of its result, and counts its runs.
    struct Lookup(Arc<AtomicUsize>);

    #[async_trait::async_trait]
    impl Tool for Lookup {
        fn name(&self) -> &str {
            "lookup"
        }
        fn description(&self) -> &str {
            "Looks a policy up"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn output_schema(&self) -> Option<Value> {
            Some(json!({
                "type": "object",
                "properties": {"policy": {"type": "string"}},
                "required": ["policy"],
            }))
        }
        fn needs_confirmation(&self, _: &Value) -> bool {
            true
        }
        async fn execute(&self, _: Value, _: ToolContext) -> Result<Value, ToolError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"policy": "from the tool"}))
        }
    }

    fn gate(runs: &Arc<AtomicUsize>) -> Gate {
        let mut registry = Registry::new();
        registry.register(Lookup(runs.clone()));
        Gate::new(
            registry,
            Store::memory(),
            Clock::manual(1_000),
            Ids::sequential(),
            Duration::from_secs(60),
            Duration::from_secs(5),
        )
    }

    /// Alice's call of `lookup`, asked; the question's id.
    async fn ask(gate: &Gate) -> String {
        let scope = Scope::alice("chat");
        let call = ToolCall {
            id: "call-1".into(),
            name: "lookup".into(),
            args: json!({"topic": "refunds"}),
        };
        match gate
            .check_new(&scope, call, ConfirmationProtocol::Adk)
            .await
        {
            Ok(NewCall::Ask(issued)) => issued.id,
            other => panic!("not asked: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_response_that_does_not_fit_leaves_the_question_open() {
        let runs = Arc::new(AtomicUsize::new(0));
        let gate = gate(&runs);
        let id = ask(&gate).await;
        let respond = |output: Value| Decision::Respond { output };
        let alice = crate::identity::Identity::new("alice", crate::identity::Source::Key);
        let refused = gate
            .decide_out_of_band(&alice, &id, respond(json!({"policy": 30})))
            .await;
        assert!(
            matches!(&refused, Ok(OutOfBand::Invalid(why)) if why.starts_with("the response does not fit the output schema of lookup")),
            "{refused:?}"
        );
        let decided = gate
            .decide_out_of_band(&alice, &id, respond(json!({"policy": "30 days"})))
            .await;
        let outcome = Outcome::Output {
            output: json!({"policy": "30 days"}),
            ran_with: None,
            responded: true,
        };
        assert_eq!(decided.ok(), Some(OutOfBand::Decided(outcome)));
        assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool never ran");
    }

    #[test]
    fn an_upstream_agents_call_takes_no_response() {
        let runs = Arc::new(AtomicUsize::new(0));
        let fits = json!({"policy": "30 days"});
        assert_eq!(gate(&runs).response_fits("lookup", &fits), Ok(()));
        assert_eq!(
            gate(&runs).with_upstream().response_fits("lookup", &fits),
            Err(Refusal::NoResponse)
        );
        assert_eq!(
            gate(&runs).response_fits("gone", &json!(1)),
            Ok(()),
            "a tool now gone declares no schema"
        );
    }
}
