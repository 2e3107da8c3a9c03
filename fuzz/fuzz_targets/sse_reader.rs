//! `Upstream::events`, toolgate's SSE reader over a provider's body, fed the
//! input in reads cut where the fuzzer chooses (see `toolgate_fuzz::reads`).
//! The events must not depend on the cuts; a broken connection ends them
//! with one error that does not show the key.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use toolgate::provider::ProviderError;
use toolgate::provider::http::{Secret, Upstream, UpstreamConfig};
use toolgate_fuzz::Read;

const KEY: &str = "sk-fuzz-key";

struct Reader {
    runtime: tokio::runtime::Runtime,
    upstream: Upstream,
}

fn reader() -> &'static Reader {
    static READER: OnceLock<Reader> = OnceLock::new();
    READER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let upstream = Upstream::new(UpstreamConfig {
            provider: "openai",
            base_url: "http://127.0.0.1:9".into(),
            headers: HeaderMap::new(),
            secret: Some(Secret(KEY.into())),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(10),
            retries: 0,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        Reader { runtime, upstream }
    })
}

/// The events of a body that arrives in `reads`, errors as their text.
fn events(reads: Vec<Read>) -> Vec<Result<sse_stream::Sse, String>> {
    let reader = reader();
    let reads = reads.into_iter().map(|read| match read {
        Read::Bytes(bytes) => Ok(bytes),
        // The key in a transport error must not reach the client.
        Read::Broken => Err(std::io::Error::other(format!("reset by {KEY}"))),
    });
    let events = reader
        .upstream
        .events(futures::stream::iter(reads))
        .map(|event| {
            event.map_err(|e| {
                assert!(matches!(e, ProviderError::Stream(_)), "{e:?}");
                e.to_string()
            })
        });
    reader.runtime.block_on(events.collect())
}

fuzz_target!(|data: &[u8]| {
    let reads = toolgate_fuzz::reads(data);
    // The same bytes in one read, up to where the connection broke.
    let mut whole = BytesMut::new();
    let mut broken = false;
    for read in &reads {
        match read {
            Read::Bytes(bytes) => whole.extend_from_slice(bytes),
            Read::Broken => {
                broken = true;
                break;
            }
        }
    }
    let mut once = vec![Read::Bytes(Bytes::from(whole))];
    if broken {
        once.push(Read::Broken);
    }
    let cut = events(reads);
    let errors = cut.iter().filter(|e| e.is_err()).count();
    assert!(errors <= 1, "{cut:?}");
    if let Some(Err(last)) = cut.last() {
        assert!(!last.contains(KEY), "{last}");
    }
    assert_eq!(cut, events(once));
});
