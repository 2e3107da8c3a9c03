//! Live listings shared among the streams that read the same one: the
//! inbox's SSE streams (`inbox.rs`). Each stream holds a share of the
//! door's pool of them (`Questions::inbox_streams`, capped per principal
//! and in total); the streams of one key (who reads, and what they
//! filter) read one feed, written by one publisher, so a change is listed
//! once per key, however many streams read it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use crate::run::{Share, ShareError, Shares};

/// What a feed carries: its latest frame (`None` until the first).
type Frame<T> = Option<Arc<T>>;

/// The feeds, by key, each carrying frames of `T`, and the streams
/// reading them.
pub struct Feeds<K, T: ?Sized> {
    inner: Mutex<Registry<K, T>>,
    streams: Arc<Shares>,
}

struct Registry<K, T: ?Sized> {
    feeds: HashMap<K, Arc<watch::Sender<Frame<T>>>>,
}

/// One stream's reading of a feed; counted until it is dropped.
pub struct Subscription<T: ?Sized> {
    pub frames: watch::Receiver<Frame<T>>,
    _share: Share,
}

/// Given to the first stream of a key: the feed's only writer, whose task
/// lists and publishes until nobody reads it.
pub struct Publisher<K: Hash + Eq, T: ?Sized> {
    tx: Arc<watch::Sender<Frame<T>>>,
    feeds: Arc<Feeds<K, T>>,
    key: K,
}

/// A stream's subscription, and the feed's publisher if it is the first.
pub type Joined<K, T> = (Subscription<T>, Option<Publisher<K, T>>);

impl<K, T: ?Sized> Feeds<K, T> {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry<K, T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Hash + Eq + Clone, T: ?Sized> Feeds<K, T> {
    /// Feeds whose streams take their places in `streams`, the door's pool.
    pub fn new(streams: Arc<Shares>) -> Self {
        Self {
            inner: Mutex::new(Registry {
                feeds: HashMap::new(),
            }),
            streams,
        }
    }

    /// A stream of `principal`'s reading `key`'s feed, if the caps leave
    /// room; with the feed's publisher when there was no feed yet (the
    /// caller then runs it).
    pub fn join(self: &Arc<Self>, principal: &str, key: K) -> Result<Joined<K, T>, ShareError> {
        let share = self.streams.take(principal)?;
        let mut registry = self.registry();
        // Subscribed under the lock: a publisher leaves only when, under
        // it, nobody reads (`Publisher::unread`).
        if let Some(tx) = registry.feeds.get(&key) {
            let frames = tx.subscribe();
            return Ok((
                Subscription {
                    frames,
                    _share: share,
                },
                None,
            ));
        }
        let (tx, frames) = watch::channel(None);
        let tx = Arc::new(tx);
        registry.feeds.insert(key.clone(), tx.clone());
        let publisher = Publisher {
            tx,
            feeds: self.clone(),
            key,
        };
        Ok((
            Subscription {
                frames,
                _share: share,
            },
            Some(publisher),
        ))
    }

    /// Streams open now, and feeds (distinct keys) they read.
    pub fn open(&self) -> (usize, usize) {
        (self.streams.held_now(), self.registry().feeds.len())
    }
}

impl<K: Hash + Eq, T: ?Sized> Publisher<K, T> {
    /// Hands every reader the latest frame.
    pub fn publish(&self, frame: Arc<T>) {
        self.tx.send_replace(Some(frame));
    }

    /// Resolves once no stream reads the feed any more; the feed is then
    /// gone, so a stream that comes later starts a new one.
    pub async fn unread(&self) {
        loop {
            self.tx.closed().await;
            let mut registry = self.feeds.registry();
            if self.tx.receiver_count() == 0 {
                self.remove_from(&mut registry);
                return;
            }
        }
    }

    /// Takes this publisher's feed out of the registry; a newer feed of
    /// the same key stays.
    fn remove_from(&self, registry: &mut Registry<K, T>) {
        if registry
            .feeds
            .get(&self.key)
            .is_some_and(|tx| Arc::ptr_eq(tx, &self.tx))
        {
            registry.feeds.remove(&self.key);
        }
    }
}

impl<K: Hash + Eq, T: ?Sized> Drop for Publisher<K, T> {
    /// A publisher gone for any reason (shutdown, a panic) takes its feed
    /// along: its readers see it end, and the next stream starts another.
    fn drop(&mut self) {
        let mut registry = self.feeds.registry();
        self.remove_from(&mut registry);
    }
}

#[cfg(test)]
mod tests;
