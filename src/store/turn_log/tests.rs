use super::*;

#[test]
fn entry_ids_name_their_first_chunk() {
    assert_eq!(first_chunk(&entry_id(41)), Some(41));
    assert_eq!(first_chunk(OPEN_ID), None);
}

#[test]
fn a_window_is_read_from_the_last_entry() {
    let fields = |f: &[&str]| f.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let window = |written, ended| Some(Window { written, ended });
    assert_eq!(
        Window::after(OPEN_ID, &fields(&["open", ""])),
        window(0, false)
    );
    // Chunks 4, 5 and 6.
    let batch = fields(&["c", "{}", "c", "{}", "c", "{}"]);
    assert_eq!(Window::after("5-0", &batch), window(7, false));
    // The end marker's id is the number after the last chunk, plus one.
    assert_eq!(Window::after("8-0", &fields(&["end", ""])), window(7, true));
    assert_eq!(Window::after("nonsense", &batch), None);
}

#[cfg(feature = "redis-server")]
use crate::store::redis::tests::redis_store;

/// A turn whose instance died after its `finish` was written, before
/// its end: a resume reads the whole message and no error after it;
/// one that died mid-message ends with the error.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn a_dead_owners_turn_ends_with_the_error_unless_it_had_finished() {
    use futures::StreamExt;
    let store = redis_store().await;
    let error = br#"{"type":"error","errorText":"gone"}"#;
    // The chat, the chunks written, the chunks a resume reads.
    type Case<'a> = (&'a str, &'a [&'a [u8]], &'a [&'a [u8]]);
    let cases: [Case; 2] = [
        (
            "finished",
            &[
                br#"{"type":"start"}"#,
                br#"{"type":"finish","finishReason":"stop"}"#,
            ],
            &[
                br#"{"type":"start"}"#,
                br#"{"type":"finish","finishReason":"stop"}"#,
            ],
        ),
        (
            "cut",
            &[
                br#"{"type":"start"}"#,
                br#"{"type":"text-delta","id":"t","delta":"{\"type\":\"finish\"}"}"#,
            ],
            &[
                br#"{"type":"start"}"#,
                br#"{"type":"text-delta","id":"t","delta":"{\"type\":\"finish\"}"}"#,
                error,
            ],
        ),
    ];
    for (chat, written, read) in cases {
        // "dead" never beat: to "alive", it is dead at once.
        let dead = TurnLogs::new(store.clone(), "dead");
        let mut writer = dead
            .open("p", chat, 1 << 20)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let batch: Vec<Bytes> = written.iter().map(|c| Bytes::copy_from_slice(c)).collect();
        writer
            .append(&batch, false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let alive = TurnLogs::new(store.clone(), "alive");
        let TakeOver::Ended(reader) = alive
            .take_over(
                Follower {
                    principal: "p",
                    capped: true,
                },
                chat,
                error,
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"))
        else {
            panic!("{chat}: not ended")
        };
        let got: Vec<Bytes> = reader
            .reads()
            .filter_map(|read| async move {
                match read {
                    Read::Chunk(_, json) => Some(json),
                    Read::Quiet => None,
                }
            })
            .collect()
            .await;
        let want: Vec<Bytes> = read.iter().map(|c| Bytes::copy_from_slice(c)).collect();
        assert_eq!(got, want, "{chat}");
    }
}

/// Both keys expire while the turn runs, and the stream a while after
/// its end, when the chat no longer names it.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn keys_expire() {
    let store = redis_store().await;
    let logs = TurnLogs::new(store.clone(), "a");
    let mut writer = logs
        .open("p", "c", 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    writer
        .append(&[Bytes::from_static(b"{}")], true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (stream, chat) = writer.keys();
    let (stream, chat) = (stream.to_owned(), chat.to_owned());
    let mut conn = store.conn();
    let ttl = |key: String| {
        let mut conn = store.conn();
        async move {
            let ms: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            ms
        }
    };
    let live = 1..=i64::try_from(millis(TURN_TTL)).unwrap_or(i64::MAX);
    assert!(live.contains(&ttl(stream.clone()).await));
    assert!(live.contains(&ttl(chat.clone()).await));
    let (owner, waiting): (String, String) = redis::cmd("HMGET")
        .arg(&chat)
        .arg("owner")
        .arg("waiting")
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((owner.as_str(), waiting.as_str()), ("a", "1"));
    writer.end().await.unwrap_or_else(|e| panic!("{e}"));
    let named = ttl(chat).await;
    assert!(
        (1..=i64::try_from(millis(REPLAYED_AFTER_END)).unwrap_or(0)).contains(&named),
        "the chat names its ended turn for {named} ms"
    );
    let kept = ttl(stream).await;
    assert!(
        kept > i64::try_from(millis(TURN_TTL)).unwrap_or(0),
        "{kept}"
    );
}
