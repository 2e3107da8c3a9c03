//! The questions people decide outside a chat's own stream: a card's `GET`
//! and `POST` and the remembered approvals and grants (`confirmations.rs`),
//! the inbox and its live feed (`inbox.rs`, `feeds.rs`), a notification's
//! signed link (`links/`), tools and the audit log (`records.rs`). Each
//! calls the door's `Questions` and words what it gets.

pub(super) mod confirmations;
pub(super) mod feeds;
pub(super) mod inbox;
pub(super) mod links;
pub(super) mod records;
