use super::*;
use crate::run::{Pool, ShareLimits};

fn feeds(per_principal: usize, total: usize) -> Arc<Feeds<&'static str, str>> {
    let limits = ShareLimits {
        per_principal,
        total,
    };
    Arc::new(Feeds::new(Shares::new(Pool::InboxStreams, limits)))
}

#[test]
fn streams_are_capped_per_principal_and_in_total() {
    let feeds = feeds(2, 3);
    let a1 = feeds.join("alice", "k");
    let a2 = feeds.join("alice", "k");
    assert!(a1.is_ok() && a2.is_ok());
    assert_eq!(
        feeds.join("alice", "other").err(),
        Some(ShareError::PerPrincipal {
            pool: Pool::InboxStreams,
            max: 2
        })
    );
    let b1 = feeds.join("bob", "b");
    assert!(b1.is_ok());
    assert_eq!(
        feeds.join("carol", "c").err(),
        Some(ShareError::Total {
            pool: Pool::InboxStreams,
            max: 3
        })
    );
    drop(a1);
    assert!(
        feeds.join("alice", "k").is_ok(),
        "a closed stream frees its place"
    );
    // The one just opened was dropped at once too.
    assert_eq!(feeds.open().0, 2);
}

#[test]
fn the_streams_of_one_key_share_one_publisher() {
    let feeds = feeds(4, 8);
    let Ok((mut first, Some(publisher))) = feeds.join("alice", "k") else {
        panic!("the first stream publishes")
    };
    let Ok((mut second, None)) = feeds.join("alice", "k") else {
        panic!("the second reads the same feed")
    };
    let Ok((_reading, Some(_other))) = feeds.join("alice", "filtered") else {
        panic!("another key, another feed")
    };
    publisher.publish("listing".into());
    for stream in [&mut first, &mut second] {
        assert_eq!(
            stream.frames.borrow_and_update().as_deref(),
            Some("listing")
        );
    }
    assert_eq!(feeds.open(), (3, 2));
}

#[tokio::test]
async fn a_feed_nobody_reads_is_gone() {
    let feeds = feeds(4, 8);
    let Ok((first, Some(publisher))) = feeds.join("alice", "k") else {
        panic!("the first stream publishes")
    };
    drop(first);
    publisher.unread().await;
    drop(publisher);
    assert_eq!(feeds.open(), (0, 0));
    let Ok((_, Some(_))) = feeds.join("alice", "k") else {
        panic!("a stream after that starts a new feed")
    };
}
