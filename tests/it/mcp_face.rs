//! toolgate as an MCP server (`/mcp`): JSON-RPC by hand over HTTP, in
//! both protocol generations: 2026-07-28 (stateless, `input_required`
//! with a sealed `requestState`) and the session generation
//! (`initialize`, `elicitation/create`, a held call).

use serde_json::{Value, json};

use crate::common::{Must, Server, api_keys};

/// The newest protocol: stateless, MRTR.
pub const NEW: &str = "2026-07-28";

/// An MCP client by hand: where, its headers, its capabilities.
pub struct Client {
    pub url: String,
    headers: Vec<(String, String)>,
    elicits: bool,
    pub session: Option<String>,
    next_id: std::cell::Cell<u64>,
}

impl Client {
    pub fn new(server: &Server) -> Self {
        Self::at(&server.url)
    }

    /// A client of the toolgate at `url`.
    pub fn at(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            headers: Vec::new(),
            elicits: true,
            session: None,
            next_id: std::cell::Cell::new(0),
        }
    }

    /// The next request id.
    pub fn next(&self) -> u64 {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        id
    }

    pub fn without_elicitation(mut self) -> Self {
        self.elicits = false;
        self
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn capabilities(&self) -> Value {
        match self.elicits {
            true => json!({"elicitation": {"form": {}}}),
            false => json!({}),
        }
    }

    /// The `_meta` a 2026-07-28 request carries.
    fn meta(&self) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": NEW,
            "io.modelcontextprotocol/clientInfo": {"name": "hand-client", "version": "1.2.3"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities(),
        })
    }

    /// The request of one JSON-RPC message, headers set.
    pub fn request(&self, version: &str, message: &Value) -> reqwest::RequestBuilder {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", self.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        // 2026-07-28's standard headers, as its clients send them.
        if version == NEW {
            if let Some(method) = message["method"].as_str() {
                request = request.header("mcp-method", method);
            }
            if let Some(name) = message["params"]["name"].as_str() {
                request = request.header("mcp-name", name);
            }
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request.body(message.to_string())
    }

    /// POSTs one JSON-RPC message; the response (JSON or SSE), with its status.
    pub async fn post(
        &self,
        version: &str,
        message: &Value,
    ) -> (u16, Vec<Value>, reqwest::header::HeaderMap) {
        let response = self.request(version, message).send().await.must();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.must();
        (status, messages(&text), headers)
    }

    /// A 2026-07-28 `tools/call`; its result.
    pub async fn call(&self, tool: &str, args: Value, extra: Value) -> Value {
        let id = self.next();
        let mut params = json!({"name": tool, "arguments": args, "_meta": self.meta()});
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (status, messages, _) = self.post(NEW, &message).await;
        assert_eq!(status, 200, "{messages:?}");
        response(&messages, id)
    }

    pub async fn list(&self) -> Vec<String> {
        let id = self.next();
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": self.meta()}});
        let (status, messages, _) = self.post(NEW, &message).await;
        assert_eq!(status, 200, "{messages:?}");
        let result = response(&messages, id);
        let tools = result["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }
}

/// `Option::unwrap` that says what is missing (unwrap is denied).
pub trait Present<T> {
    fn present(self) -> T;
}

impl<T> Present<T> for Option<T> {
    #[track_caller]
    fn present(self) -> T {
        match self {
            Some(value) => value,
            None => panic!("missing"),
        }
    }
}

/// The JSON-RPC messages of a body: one JSON value, or SSE `data:` lines.
pub fn messages(text: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return vec![value];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// The response to request `id` among `messages`.
pub fn response(messages: &[Value], id: u64) -> Value {
    messages
        .iter()
        .find(|m| m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some()))
        .cloned()
        .unwrap_or_else(|| panic!("no response {id} in {messages:?}"))
}

pub fn text_of(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `requestState` of an `input_required` answer.
pub fn request_state(response: &Value) -> String {
    let state = response["result"]["requestState"].as_str();
    state
        .unwrap_or_else(|| panic!("no requestState: {response}"))
        .to_owned()
}

pub fn is_error(response: &Value) -> bool {
    response["result"]["isError"] == json!(true)
}

pub fn pay(amount: u32) -> Value {
    json!({"amount": amount, "recipient": "花子", "currency": "USD"})
}

#[tokio::test]
async fn the_tools_listed_are_those_the_policy_may_run() {
    let server = Server::from_yaml(
        "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--get_weather]\n",
    )
    .await;
    let names = Client::new(&server).list().await;
    assert!(names.contains(&"process_payment".to_owned()), "{names:?}");
    assert!(!names.contains(&"get_weather".to_owned()), "{names:?}");
}

#[tokio::test]
async fn an_allowed_call_runs_once_and_returns_its_result() {
    let server = Server::start().await;
    let client = Client::new(&server);
    let reply = client
        .call("get_weather", json!({"city": "Tokyo"}), json!({}))
        .await;
    assert!(!is_error(&reply), "{reply}");
    assert!(text_of(&reply).contains("Tokyo"), "{reply}");
    assert_eq!(reply["result"]["structuredContent"]["city"], "Tokyo");
}

#[tokio::test]
async fn a_denied_call_is_an_error_result_and_runs_nothing() {
    let server = Server::from_yaml(
        "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--process_payment]\n",
    )
    .await;
    let reply = Client::new(&server)
        .call("process_payment", pay(5), json!({}))
        .await;
    assert!(is_error(&reply), "{reply}");
    assert!(text_of(&reply).contains("denied by policy"), "{reply}");
    assert_eq!(server.payments(), 0);
    let unknown = Client::new(&server)
        .call("no_such_tool", json!({}), json!({}))
        .await;
    assert!(is_error(&unknown), "{unknown}");
}

#[tokio::test]
async fn an_approval_through_elicitation_runs_the_call_once() {
    let server = Server::start().await;
    let client = Client::new(&server);
    let first = client.call("process_payment", pay(5), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let form = &result["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create", "{first}");
    assert!(
        form["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("process_payment")
    );
    assert_eq!(
        form["params"]["requestedSchema"]["properties"]["approve"]["type"],
        "boolean"
    );
    let state = request_state(&first);
    assert_eq!(server.payments(), 0);
    let answer = json!({"requestState": state, "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}});
    let second = client.call("process_payment", pay(5), answer.clone()).await;
    assert!(!is_error(&second), "{second}");
    assert!(text_of(&second).contains("completed"), "{second}");
    assert_eq!(server.payments(), 1);
    // The same state again: the recorded outcome, nothing runs twice.
    let replay = client.call("process_payment", pay(5), answer).await;
    assert_eq!(text_of(&replay), text_of(&second), "{replay}");
    assert_eq!(server.payments(), 1);
    // The audit log names the client.
    let audit = server.get("/api/audit").await.body;
    let events: Vec<Value> = audit
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let approved = events
        .iter()
        .find(|e| e["decision"] == "approved")
        .present();
    assert_eq!(approved["client"], "hand-client 1.2.3", "{audit}");
}

#[tokio::test]
async fn a_declined_or_denied_form_runs_nothing() {
    let server = Server::start().await;
    for (n, answer) in [
        json!({"action": "accept", "content": {"approve": false, "reason": "too much"}}),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
    ]
    .into_iter()
    .enumerate()
    {
        let client = Client::new(&server);
        let args = pay(10 + u32::try_from(n).must());
        let first = client
            .call("process_payment", args.clone(), json!({}))
            .await;
        let state = request_state(&first);
        let extra = json!({"requestState": state, "inputResponses": {"approval": answer}});
        let reply = client.call("process_payment", args, extra).await;
        assert!(is_error(&reply), "{reply}");
        assert!(text_of(&reply).contains("User denied execution"), "{reply}");
    }
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_client_that_cannot_elicit_waits_for_a_decision_made_elsewhere() {
    let server = Server::from_yaml("mcp:\n  retryWaitMs: 100\n").await;
    let client = Client::new(&server).without_elicitation();
    let first = client.call("process_payment", pay(7), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert!(result.get("inputRequests").is_none(), "{first}");
    let state = request_state(&first);
    let retry = json!({"requestState": state});
    let again = client.call("process_payment", pay(7), retry.clone()).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let open = server.get("/api/confirmations").await.json();
    let id = open[0]["id"].as_str();
    let id = id.unwrap_or_else(|| panic!("{open}")).to_owned();
    assert_eq!(server.approve(&id).await.status, 200);
    let done = client.call("process_payment", pay(7), retry).await;
    assert!(text_of(&done).contains("completed"), "{done}");
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_forged_altered_or_foreign_state_runs_nothing() {
    let keys = api_keys(&[("alice", "ka"), ("bob", "kb")]);
    let server = Server::from_yaml(&keys).await;
    let alice = Client::new(&server).with_header("authorization", "Bearer ka");
    let first = alice.call("process_payment", pay(5), json!({})).await;
    let state = request_state(&first);
    let approve = |state: &str| json!({"requestState": state, "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}});
    let (head, signature) = state.rsplit_once('.').present();
    let mut flipped = signature.to_owned();
    flipped.replace_range(0..1, if signature.starts_with('0') { "1" } else { "0" });
    let forged = format!("{head}.{flipped}");
    let bob = Client::new(&server).with_header("authorization", "Bearer kb");
    for (client, args, state) in [
        (&alice, pay(5), forged),
        (&alice, pay(6), state.clone()),
        (&bob, pay(5), state.clone()),
        (&alice, pay(5), "approval-1.99999999999999.00".to_owned()),
    ] {
        let reply = client.call("process_payment", args, approve(&state)).await;
        assert!(is_error(&reply), "{reply}");
        assert!(text_of(&reply).contains("requestState"), "{reply}");
    }
    assert_eq!(server.payments(), 0);
    // Without a key, nothing at all.
    let (status, _, _) = Client::new(&server)
        .post(
            NEW,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(status, 401);
}
