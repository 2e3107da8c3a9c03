//! Older clients' sessions (`Mcp-Session-Id`) on the door's [`Sessions`]:
//! rmcp's `LocalSessionManager` keeps each session's worker, and every
//! session it makes, closes or times out is told to the door, which binds
//! it to the principal that opened it and counts it against their share.
//! This file maps the wire (the header, rmcp's hooks) and rules nothing.

use std::cell::Cell;
use std::sync::Arc;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

use crate::run::{SessionError, Sessions};

/// The header that names an older client's session.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

tokio::task_local! {
    /// Who the request being served is, for a session it opens; and the
    /// door's refusal, for the face's edge to say.
    pub(super) static OPENER: Opener;
}

/// One request's caller, as a session it opens needs them.
pub(super) struct Opener {
    pub principal: Arc<str>,
    /// Whether callers are told apart (keys or a principal header): then
    /// the caller's own share holds, else only the total.
    pub capped: bool,
    pub refused: Cell<Option<SessionError>>,
}

impl Opener {
    pub fn new(principal: &str, capped: bool) -> Self {
        Self {
            principal: principal.into(),
            capped,
            refused: Cell::new(None),
        }
    }
}

/// Why rmcp's session manager failed: its own failure, or the door refused
/// to open a session (which the edge answers itself, from [`Opener`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum OwnedError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error("the session was not opened")]
    Refused,
}

/// rmcp's sessions, each one the door's.
#[derive(Debug)]
pub(super) struct OwnedSessions {
    pub local: LocalSessionManager,
    pub sessions: Arc<Sessions>,
}

impl SessionManager for OwnedSessions {
    type Error = OwnedError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Taken before the session exists, so nobody opens one past their share.
        let opening = OPENER
            .try_with(|opener| {
                self.sessions
                    .opening(&opener.principal, opener.capped)
                    .inspect_err(|e| opener.refused.set(Some(*e)))
            })
            .map_err(|_| OwnedError::Refused)?
            .map_err(|_| OwnedError::Refused)?;
        let (id, transport) = self.local.create_session().await?;
        self.sessions.bind(opening, &id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    /// A `DELETE`, or the session's worker ended (idle past rmcp's keep-alive).
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.sessions.close(id);
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Sessions live in this process: one another instance made is not here.
        Ok(RestoreOutcome::NotSupported)
    }
}
