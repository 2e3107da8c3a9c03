//! The one subscription to outcomes an instance's waiters share.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

use super::backend;
use crate::store::{Result, StoreError};

/// The one subscription to the outcomes channel of an instance, shared by
/// every waiter on it: each outcome's id, told to all of them. The first
/// waiter makes it (others that come meanwhile wait for that one); it
/// ends once no waiter is left, or when its connection drops.
pub(super) struct Outcomes {
    current: std::sync::Mutex<std::sync::Arc<Subscription>>,
    tasks: TaskTracker,
}

/// One subscription, made once.
type Subscription = tokio::sync::OnceCell<broadcast::Sender<std::sync::Arc<str>>>;

/// Outcomes a slow waiter may be behind before it looks for itself.
const TOLD: usize = 1024;

/// How often the subscription looks whether any waiter is left.
const IDLE: Duration = Duration::from_secs(1);

impl Outcomes {
    pub(super) fn new(tasks: TaskTracker) -> Self {
        Self {
            current: std::sync::Mutex::new(std::sync::Arc::default()),
            tasks,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::sync::Arc<Subscription>> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The ids of outcomes from now on: from the subscription there is,
    /// or from a new one, subscribed before this returns.
    pub(super) async fn subscribe(
        self: &std::sync::Arc<Self>,
        client: &redis::Client,
        channel: &str,
    ) -> Result<broadcast::Receiver<std::sync::Arc<str>>> {
        loop {
            let current = self.lock().clone();
            let told = current
                .get_or_try_init(|| async {
                    let mut pubsub = client.get_async_pubsub().await.map_err(backend)?;
                    pubsub.subscribe(channel).await.map_err(backend)?;
                    let (told, _) = broadcast::channel(TOLD);
                    self.tasks
                        .spawn(self.clone().tell(pubsub, told.clone(), current.clone()));
                    Ok::<_, StoreError>(told)
                })
                .await?;
            let receiver = told.subscribe();
            // Still the one there is: it counts this waiter before it
            // looks whether any is left (under the same lock).
            if std::sync::Arc::ptr_eq(&self.lock(), &current) {
                return Ok(receiver);
            }
        }
    }

    /// Tells each outcome's id until the subscription drops or no waiter
    /// is left (looked at every [`IDLE`]); then the next waiter makes a
    /// new one.
    async fn tell(
        self: std::sync::Arc<Self>,
        pubsub: redis::aio::PubSub,
        told: broadcast::Sender<std::sync::Arc<str>>,
        this: std::sync::Arc<Subscription>,
    ) {
        let mut messages = pubsub.into_on_message();
        let mut looked = tokio::time::Instant::now();
        loop {
            match tokio::time::timeout(IDLE, messages.next()).await {
                Ok(Some(message)) => {
                    if let Ok(id) = message.get_payload::<String>() {
                        // None listening is no error: the look below ends it.
                        told.send(id.into()).ok();
                    }
                }
                Ok(None) => break,
                Err(_idle) => {}
            }
            if looked.elapsed() < IDLE {
                continue;
            }
            looked = tokio::time::Instant::now();
            let mut current = self.lock();
            if told.receiver_count() == 0 {
                if std::sync::Arc::ptr_eq(&current, &this) {
                    *current = std::sync::Arc::default();
                }
                return;
            }
        }
        // Dropped: its waiters see it closed, and make another.
        let mut current = self.lock();
        if std::sync::Arc::ptr_eq(&current, &this) {
            *current = std::sync::Arc::default();
        }
    }
}
