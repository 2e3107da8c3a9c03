//! The followed turns' pool and its feeds.
use super::*;

fn fields(chunks: &[&str]) -> Vec<Vec<u8>> {
    chunks
        .iter()
        .flat_map(|c| [b"c".to_vec(), c.as_bytes().to_vec()])
        .collect()
}

#[test]
fn entries_read_in_order_and_gaps_are_seen() {
    let chunks = |from: usize, texts: &[&str]| {
        Entry::Chunks(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| (from + i, Bytes::from(t.to_string())))
                .collect(),
        )
    };
    // (entry id, its fields, the chunk expected, what it says, the next expected)
    type Case = (&'static str, Vec<Vec<u8>>, usize, Entry, usize);
    let cases: Vec<Case> = vec![
        ("1-0", fields(&["a", "b"]), 0, chunks(0, &["a", "b"]), 2),
        ("3-0", fields(&["c"]), 2, chunks(2, &["c"]), 3),
        ("5-0", fields(&["e"]), 3, Entry::Gap, 3),
        ("0-1", vec![b"open".to_vec(), vec![]], 0, Entry::Open, 0),
        ("4-0", vec![b"end".to_vec(), vec![]], 3, Entry::End, 3),
        ("x", fields(&["a"]), 0, Entry::Gap, 0),
    ];
    for (id, fields, next, want, after) in cases {
        let mut n = next;
        assert_eq!(read_entry(id, fields, &mut n), want, "{id}");
        assert_eq!(n, after, "{id}");
    }
}

/// Followers of one feed each read every chunk from the start, however
/// late they join, a quiet spell that begins while they follow, and
/// the end; one whose chunks are no longer kept ends there.
#[tokio::test]
async fn followers_share_a_feed() {
    use futures::StreamExt;
    let chunk = |n: usize, c: &'static str| Read::Chunk(n, Bytes::from_static(c.as_bytes()));
    let feed = Arc::new(Feed::new());
    feed.push(vec![(0, Bytes::from_static(b"a"))]);
    let early = feed.clone().reads();
    futures::pin_mut!(early);
    assert_eq!(early.next().await, Some(chunk(0, "a")));
    feed.push(vec![
        (1, Bytes::from_static(b"b")),
        (2, Bytes::from_static(b"c")),
    ]);
    assert_eq!(early.next().await, Some(chunk(1, "b")));
    assert_eq!(early.next().await, Some(chunk(2, "c")));
    feed.change(|state| state.quiet += 1);
    assert_eq!(early.next().await, Some(Read::Quiet));
    let late = feed.clone().reads();
    feed.change(|state| state.end = End::Ended);
    assert_eq!(early.collect::<Vec<_>>().await, vec![]);
    assert_eq!(
        late.collect::<Vec<_>>().await,
        vec![chunk(0, "a"), chunk(1, "b"), chunk(2, "c")]
    );

    let trimmed = Arc::new(Feed::new());
    let big = Bytes::from(vec![b'x'; KEPT_BYTES]);
    trimmed.push(vec![(0, big.clone()), (1, big.clone())]);
    trimmed.change(|state| state.end = End::Ended);
    assert_eq!(trimmed.clone().reads().collect::<Vec<_>>().await, vec![]);
}

/// One principal takes at most their share of the followed turns,
/// whatever room the total leaves, and another principal's turn is
/// still followed; a place comes back when its reader stops. Where
/// callers are not told apart only the total holds.
#[test]
fn a_principal_takes_only_their_share() {
    let feeds = Feeds::new(
        TaskTracker::new(),
        FollowLimits {
            total: 4,
            per_principal: 2,
        },
    );
    let place = |principal, capped| feeds.place(Follower { principal, capped });
    let mallory = [place("mallory", true), place("mallory", true)];
    assert!(mallory.iter().all(Result::is_ok));
    assert!(matches!(
        place("mallory", true),
        Err(StoreError::FollowedPerUser(2))
    ));
    let alice = place("alice", true);
    assert!(alice.is_ok(), "another user's turn is still followed");
    let [first, _second] = mallory;
    drop(first);
    assert!(
        place("mallory", true).is_ok(),
        "a stopped reader's place is free"
    );
    // Not in a share: two more fill the total (the place just given
    // was dropped at once).
    let everyone = [place("anonymous", false), place("anonymous", false)];
    assert!(everyone.iter().all(Result::is_ok));
    assert!(matches!(
        place("anonymous", false),
        Err(StoreError::Followed(4))
    ));
    assert!(matches!(place("bob", true), Err(StoreError::Followed(4))));
    drop((alice, everyone));
    assert_eq!(feeds.places.held_now(), 1);
    assert_eq!(feeds.places.held_by("mallory"), 1);
    assert_eq!(feeds.places.held_by("alice"), 0);
}

/// Resumes of one turn that come together share one feed and one
/// place under the cap: with room for a single followed turn, twenty
/// at once are all taken, on the one feed.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn resumes_that_come_together_share_one_place() {
    let client = redis::Client::open(crate::store::redis::tests::url().as_str())
        .unwrap_or_else(|e| panic!("{e}"));
    let tasks = TaskTracker::new();
    let limits = FollowLimits {
        total: 1,
        per_principal: 1,
    };
    let feeds = Feeds::new(tasks.clone(), limits);
    let stream = format!("test-{}:log", uuid::Uuid::new_v4().simple());
    let follower = Follower {
        principal: "p",
        capped: true,
    };
    let followed =
        futures::future::join_all((0..20).map(|_| feeds.follow(&client, &stream, follower))).await;
    let followed: Vec<Arc<Feed>> = followed
        .into_iter()
        .map(|f| f.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert!(followed.iter().all(|f| Arc::ptr_eq(f, &followed[0])));
    drop(followed);
    tasks.close();
    tasks.wait().await;
}
