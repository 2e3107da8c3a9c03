//! The gate, the model, the store's jobs and the routes, made from the
//! [`Settings`] once: nothing here reads the config or falls back to a
//! default of its own.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::Router;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio_util::task::TaskTracker;

use crate::agent::Agent;
use crate::config::{AllowedToolsStorage, ModelSettings, ProviderKind};
use crate::confirm::{Gate, Signer};
use crate::faces::mcp::McpFace;
use crate::faces::{HttpState, Oidc, router};
use crate::ids::{Clock, Ids};
use crate::metrics::Metrics;
use crate::notify::{Links, Notifier, Plan as NotifyPlan};
use crate::provider::adk::Adk;
use crate::provider::anthropic::Anthropic;
use crate::provider::gemini::Gemini;
use crate::provider::measured::Measured;
use crate::provider::openai::OpenAi;
use crate::provider::{ModelProvider, ModelRequest, ProviderError, ProviderEvent, ScriptedModel};
use crate::run::{Calls, Limits as RunLimits, Questions, Runs};
use crate::store::Store;
use crate::tools::Toolbox;
use crate::tools::mcp;

use super::{App, chores};

/// The routes, and what serving them runs.
pub(super) struct Built {
    pub router: Router,
    /// `/metrics`, `/livez` and `/readyz` alone, for `metrics.bind`: behind
    /// the Host and Origin checks of the address they are served at.
    pub metrics_routes: Box<dyn FnOnce(IpAddr) -> Router + Send>,
    /// The store's background chores ([`chores::run`]), until aborted.
    pub chores: BoxFuture<'static, ()>,
    pub gate: Gate,
    /// The turns', sockets' and chores' tasks.
    pub tasks: TaskTracker,
    pub runs: Arc<Runs>,
    /// Set when serving starts to stop.
    pub draining: Arc<AtomicBool>,
    /// The MCP face (served at `/mcp` when `mcp.enabled`; `toolgate mcp`
    /// serves it over stdio); `None` only without a key for its states.
    pub mcp: Option<McpFace>,
}

impl App {
    /// The routes, and what serving them runs; `bind` is the address served.
    pub(super) fn build(self, bind: Option<IpAddr>) -> Built {
        let settings = self.settings;
        // Seals MCP's `requestState`: the signing keys, else a key made now.
        let state_signer = self
            .signer
            .clone()
            .or_else(|| Signer::new(settings.signing_keys.clone()))
            .or_else(random_signer);
        let notifier = notifier(settings.notify, &settings.signing_keys, &self.clock);
        let links = notifier.as_ref().map(|n| n.links().clone());
        let metrics = Metrics::new();
        let (provider_label, system) = match self.provider {
            Some(_) => ("application", "application"),
            None => (
                provider_name(settings.model.provider),
                provider_system(settings.model.provider),
            ),
        };
        let model = settings.model.name.as_deref().unwrap_or(system).into();
        let provider = self
            .provider
            .unwrap_or_else(|| model_provider(&settings.model, self.ids.clone()));
        let provider: Arc<dyn ModelProvider> = Arc::new(Measured {
            inner: provider,
            metrics: metrics.clone(),
            provider: provider_label,
            system,
            model,
        });
        let adk = adk_agent(&settings.model);
        let toolbox = Toolbox::new(settings.registry);
        mcp::start(settings.mcp_servers, &toolbox);
        let tasks = TaskTracker::new();
        let store = self
            .store
            .with_retention(settings.store.audit_retention)
            .with_tasks(&tasks)
            .with_metrics(&metrics);
        let limiter = store.limiter(settings.rates, tasks.clone(), &self.instance);
        let turn_logs = store
            .turn_logs(&self.instance)
            .map(|logs| logs.following(tasks.clone(), settings.store.followed));
        let gate = Gate::new(
            toolbox,
            store.clone(),
            self.clock.clone(),
            self.ids.clone(),
            settings.confirmation.window,
            settings.tool_timeout,
        )
        .with_signer(self.signer)
        .with_policy(settings.policy)
        .with_result_retention(settings.store.audit_retention)
        .with_instance(self.instance)
        .with_roles(settings.auth.roles)
        .with_notifier(notifier)
        .with_metrics(metrics.clone())
        .with_limiter(limiter.clone())
        .with_record_content(settings.telemetry.record_content);
        let gate = match settings.confirmation.allowed_tools_storage {
            AllowedToolsStorage::Storage => gate,
            AllowedToolsStorage::Memory => {
                gate.with_remembered_store(Store::memory().with_metrics(&metrics))
            }
        };
        let gate = match adk {
            Some(_) => gate.with_upstream(),
            None => gate,
        };
        let stream = settings.stream;
        let agent = Arc::new(Agent {
            gate: gate.clone(),
            provider,
            ids: self.ids,
            max_steps: stream.max_steps,
            denied_as: settings.confirmation.denied_as,
            upstream: adk.map(Arc::new),
            turn_logs: turn_logs.clone(),
        });
        let client_version = settings.client_version;
        if turn_logs.is_some() {
            // Its turns are its own while it beats (a lease others judge).
            gate.keep_beating();
        }
        let draining = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(
            Runs::new(RunLimits {
                // `limits.concurrentStreams` is this cap, when set.
                per_principal: stream.max_turns_per_user,
                total: stream.max_turns,
                stall: stream.stalled_reader,
                held: stream.held_turn,
            })
            .with_tasks(tasks.clone())
            .with_turn_logs(turn_logs)
            .with_takeover(crate::run::continue_held(
                agent.clone(),
                client_version,
                metrics.clone(),
            )),
        );
        let live = settings.live;
        let inbox_streams = crate::run::ShareLimits {
            per_principal: stream.max_inbox_streams_per_user,
            total: stream.max_inbox_streams,
        };
        let questions = Arc::new(Questions::new(gate.clone(), inbox_streams));
        let inbox_feeds = Arc::new(crate::faces::InboxFeeds::new(questions.inbox_streams()));
        let state = HttpState::from(crate::faces::Http {
            keep_alive: stream.keep_alive,
            max_body_bytes: stream.max_body_bytes,
            principal_header: settings.auth.principal_header,
            api_keys: Arc::new(settings.auth.api_keys),
            oidc: settings.auth.oidc.map(|o| Arc::new(Oidc::new(o))),
            turns: Arc::new(crate::run::Turns {
                agent: agent.clone(),
                runs: runs.clone(),
                limiter: limiter.clone(),
                metrics: metrics.clone(),
                protocol: settings.confirmation.protocol,
                flow: settings.confirmation.flow,
                client_version,
                trust_traceparent: settings.telemetry.trust_traceparent,
            }),
            questions,
            live: crate::faces::LiveLimits {
                idle: live.idle,
                frames_per_sec: live.frames_per_sec,
                dialect: live.dialect,
                key_deadline: live.key_deadline,
                keyless_frame_bytes: live.keyless_frame_bytes,
            },
            tasks: tasks.clone(),
            links,
            metrics: metrics.clone(),
            metrics_route: settings.metrics.route,
            draining: draining.clone(),
            health: crate::run::Health::new(gate.clone(), settings.required_mcp.into()),
            inbox_feeds,
        });
        let metrics_routes = crate::faces::metrics_routes(state.clone());
        let mcp = state_signer.map(|signer| {
            let calls = Calls::new(gate.clone(), signer);
            McpFace::new(
                calls,
                settings.mcp.retry_wait,
                settings.mcp.hold,
                metrics.clone(),
            )
        });
        let mcp_routes = match &mcp {
            Some(face) if settings.mcp.enabled => {
                let sessions =
                    crate::run::Sessions::new(crate::run::Pool::McpSessions, settings.mcp.sessions);
                Some(crate::faces::mcp::routes(
                    state.clone(),
                    face.clone(),
                    sessions,
                ))
            }
            _ => None,
        };
        let router = router(state);
        let router = match mcp_routes {
            Some(mcp_routes) => router.merge(mcp_routes),
            None => router,
        };
        let router = if settings.demo {
            router.merge(crate::faces::demo::routes())
        } else {
            router
        };
        let guard = settings.guard;
        // The metrics listener's guard serves its own address instead.
        let metrics_guard = guard.clone();
        let guard = match bind {
            Some(bind) => guard.with_bind(bind),
            None => guard,
        };
        let body = crate::faces::BodyTimes {
            silence: settings.server.body_read,
            total: settings.server.body_total,
        };
        let router = crate::faces::protect(router, guard, body);
        let chores = chores::run(
            gate.clone(),
            store,
            self.clock,
            settings.store.audit_retention,
            limiter,
        );
        Built {
            router,
            metrics_routes: Box::new(move |at| {
                crate::faces::protect(metrics_routes, metrics_guard.with_bind(at), body)
            }),
            chores: Box::pin(chores),
            gate,
            tasks,
            runs,
            draining,
            mcp,
        }
    }
}

/// A signer with a random key made now, for MCP's `requestState` when no
/// signing key is set: states then die with a restart.
fn random_signer() -> Option<Signer> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)
        .inspect_err(|e| tracing::error!("no random key for MCP's requestState, no MCP face: {e}"))
        .ok()?;
    tracing::info!(
        "MCP requestStates are sealed with a key made at start: they stop working when toolgate restarts (set toolConfirmation.signingKeys to keep them)"
    );
    Signer::new([hex::encode(key)])
}

/// Who is told about each question (`toolConfirmation.notify`), its links
/// signed with the first signing key, else with a random key made now
/// (links then die with a restart).
fn notifier(plan: Option<NotifyPlan>, keys: &[String], clock: &Clock) -> Option<Notifier> {
    let plan = plan?;
    let links = match Links::new(keys.to_vec()) {
        Some(links) => links,
        None => {
            tracing::info!(
                "notification links are signed with a key made at start: they stop working when toolgate restarts (set toolConfirmation.signingKeys to keep them)"
            );
            Links::random()
                .inspect_err(|e| tracing::error!("{e}: nobody is notified"))
                .ok()?
        }
    };
    Notifier::new(plan, links, clock.clone())
        .inspect_err(|e| tracing::error!("{e}: nobody is notified"))
        .ok()
}

/// A provider's name as metrics label it.
fn provider_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Scripted => "scripted",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gemini",
        ProviderKind::Adk => "adk",
    }
}

/// A provider's `gen_ai.provider.name` (OpenTelemetry's GenAI conventions).
fn provider_system(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Scripted => "scripted",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gcp.gemini",
        ProviderKind::Adk => "adk",
    }
}

/// The model the settings name.
fn model_provider(model: &ModelSettings, ids: Ids) -> Arc<dyn ModelProvider> {
    let Some((upstream, options)) = &model.upstream else {
        return Arc::new(ScriptedModel::new(ids).with_delta_delay(model.delta_delay));
    };
    let (upstream, options) = (upstream.clone(), options.clone());
    match model.provider {
        ProviderKind::Openai => Arc::new(OpenAi::new(upstream, options, ids)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(upstream, options, ids)),
        ProviderKind::Gemini => Arc::new(Gemini::new(upstream, options, ids)),
        ProviderKind::Scripted => Arc::new(ScriptedModel::new(ids)),
        // The agent runs its own model: a turn never asks this one.
        ProviderKind::Adk => Arc::new(Unavailable("the ADK agent runs its own model".into())),
    }
}

/// The ADK agent the settings name, if they name one.
fn adk_agent(model: &ModelSettings) -> Option<Adk> {
    match (&model.upstream, model.provider) {
        (Some((upstream, options)), ProviderKind::Adk) => {
            Some(Adk::new(upstream.clone(), options.model.clone()))
        }
        _ => None,
    }
}

/// A model no turn may ask: every turn that does says why.
struct Unavailable(String);

impl ModelProvider for Unavailable {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let error = ProviderError::Request(self.0.clone());
        Box::pin(futures::stream::once(async move { Err(error) }))
    }
}
