//! Shared pieces of Sluice's fuzz targets: the panic guard, the input format of the `dispatch`
//! target, the per-process broker it drives, and the seed requests (see `tests/gen_corpus.rs`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;
use sluice::broker::Broker;
use sluice::net::response::Response;
use sluice::testing::LocalBroker;

pub mod seeds;

// ---- panic guard ----------------------------------------------------------------------------

static FUZZ_THREAD: OnceLock<ThreadId> = OnceLock::new();

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Replaces libfuzzer-sys's panic hook (which aborts on *every* panic, even one that Sluice's
/// own `catch_unwind` guards turn into an error) with one that
/// * on the fuzzing thread only remembers the message: whether the panic is a finding is
///   decided by [`guarded`], i.e. by whether it escapes Sluice's guards;
/// * on any other thread (tokio's blocking pool: `spawn_blocking` in topic deletion) prints it
///   and aborts, since Sluice drops those `JoinError`s and would hide the panic.
pub fn install_panic_hook() {
    FUZZ_THREAD.get_or_init(|| std::thread::current().id());
    std::panic::set_hook(Box::new(|info| {
        let msg = format!("{info}");
        if Some(&std::thread::current().id()) == FUZZ_THREAD.get() {
            LAST_PANIC.with(|p| *p.borrow_mut() = msg);
        } else {
            eprintln!("==== panic on thread {:?}: {msg}", std::thread::current().name());
            eprintln!("{}", std::backtrace::Backtrace::force_capture());
            std::process::abort();
        }
    }));
}

/// Runs `f`; a panic that reaches here escaped every guard in Sluice: print it and abort, so
/// libFuzzer records the input as a crash.
pub fn guarded(f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        let msg = LAST_PANIC.with(|p| p.borrow().clone());
        eprintln!("==== panic escaped Sluice's guards: {msg}");
        std::process::abort();
    }
}

// ---- the decode_request target --------------------------------------------------------------

/// One frame through the request parser and the typed decoders. Returns whether it decoded.
pub fn decode_one(frame: &[u8]) -> bool {
    match sluice::api::parse_frame(Bytes::copy_from_slice(frame)) {
        Ok(sluice::api::Parsed::Request { ctx, body, .. }) => {
            sluice::api::decode_any(&ctx, body).is_ok()
        }
        Ok(sluice::api::Parsed::UnsupportedApiVersions { .. }) => true,
        Err(_) => false,
    }
}

// ---- the dispatch target's input format -----------------------------------------------------

/// Splits a `dispatch` input into frames: byte 0 gives the number of frames ((b & 7) + 1),
/// then each frame is a big-endian u16 length and that many bytes (the last one takes what is
/// left when the input is shorter).
pub fn split_frames(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let Some((&first, mut rest)) = data.split_first() else {
        return out;
    };
    let n = (first & 7) as usize + 1;
    while out.len() < n && rest.len() >= 2 {
        let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        rest = &rest[2..];
        let take = len.min(rest.len());
        out.push(&rest[..take]);
        rest = &rest[take..];
    }
    out
}

/// The inverse of [`split_frames`] (frames of at most 65535 bytes, at most 8 of them).
pub fn join_frames(frames: &[Vec<u8>]) -> Vec<u8> {
    assert!(!frames.is_empty() && frames.len() <= 8);
    let mut out = vec![(frames.len() - 1) as u8];
    for f in frames {
        let len = u16::try_from(f.len()).expect("frame too long for the dispatch input format");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

// ---- the dispatch target's broker -----------------------------------------------------------

/// Name and partition count of the topic every run starts with.
pub const TOPIC: &str = "t";
pub const PARTITIONS: i32 = 3;

pub struct Harness {
    node: LocalBroker,
    pub broker: Arc<Broker>,
    pub dir: PathBuf,
}

/// How long, in the paused runtime's virtual time, one frame may take. A running node's own
/// timers (the quorum's ticks, broker heartbeats) fire a few times a virtual second, so a
/// request waiting up to i32::MAX ms (Fetch's max_wait_ms from the wire) would take that many
/// wake-ups; past this bound it is dropped unanswered, as by a client that gave up.
const FRAME_TIME: Duration = Duration::from_secs(60);

/// Removes data dirs of earlier fuzzing processes that are gone (libFuzzer exits without
/// running destructors, and -jobs/-fork start many processes).
fn remove_stale(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(pid) = name.strip_prefix("sluice-fuzz-")
            && pid.parse::<u32>().is_ok()
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Harness {
    /// A one-voter node on a fresh data dir (tmpfs when there is one), auto-creation off,
    /// topic `t` with 3 partitions, run by a current-thread runtime whose clock is paused (it
    /// jumps ahead when everything waits, so Fetch's max_wait_ms costs nothing) and that
    /// drives the node only while a frame runs.
    pub fn new() -> Harness {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        remove_stale(&base);
        let dir = base.join(format!("sluice-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("tokio runtime");
        let node = sluice::testing::Broker::builder()
            .data_dir(&dir)
            .property("auto.create.topics.enable", "false")
            // Small segments so that produce inputs exercise rolling.
            .property("log.segment.bytes", "65536")
            .start_on(rt)
            .expect("start the fuzz broker");
        let h = Harness {
            broker: node.broker().clone(),
            node,
            dir,
        };
        h.reset();
        h
    }

    /// The process's harness.
    pub fn get() -> &'static Harness {
        static H: OnceLock<Harness> = OnceLock::new();
        H.get_or_init(Harness::new)
    }

    /// Runs the frames through `dispatch` in order, checking each response. Errors are fine
    /// (they close a connection); panics are not. A frame still waiting after [`FRAME_TIME`]
    /// of virtual time is dropped.
    pub fn run(&self, frames: &[&[u8]]) {
        self.node.block_on(async {
            for f in frames {
                if known_dos(f) {
                    continue;
                }
                let frame = Bytes::copy_from_slice(f);
                let r =
                    tokio::time::timeout(FRAME_TIME, self.broker.dispatch(frame));
                if let Ok(Ok(Some(resp))) = r.await {
                    check_response(f, &resp);
                }
            }
        });
        self.reset();
    }

    /// Runs `f` on the harness's runtime, which drives the broker meanwhile.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.node.block_on(f)
    }

    /// Back to the starting state: only topic `t` (recreated if an input deleted it). Its
    /// records stay, so offsets grow over a fuzzing run.
    pub fn reset(&self) {
        let b = &self.broker;
        self.node.block_on(async {
            for t in b.controller.topics() {
                if &*t.name != TOPIC {
                    self.node
                        .delete_topic(&t.name)
                        .await
                        .unwrap_or_else(|e| panic!("reset: {e:#}"));
                }
            }
            if b.controller.topic(TOPIC).is_none() {
                self.node
                    .create_topic(TOPIC, PARTITIONS, BTreeMap::new())
                    .await
                    .unwrap_or_else(|e| panic!("reset: {e:#}"));
            }
        });
    }
}

/// Frames that hit a known, reported denial of service and would only make libFuzzer stop
/// with a timeout again (fuzz/README.md, "Findings"): CreateTopics asking for more than 64
/// partitions (Sluice has no cap; creating 262,146 partitions took > 10 s and the partition
/// directory choice is quadratic). Such frames are skipped, everything else is dispatched.
pub fn known_dos(frame: &[u8]) -> bool {
    use kafka_protocol::messages::RequestKind;
    let Ok(sluice::api::Parsed::Request { ctx, body, .. }) =
        sluice::api::parse_frame(Bytes::copy_from_slice(frame))
    else {
        return false;
    };
    if ctx.api_key != ApiKey::CreateTopics {
        return false;
    }
    match sluice::api::decode_any(&ctx, body) {
        Ok(RequestKind::CreateTopics(r)) => {
            !r.validate_only
                && r.topics
                    .iter()
                    .any(|t| t.num_partitions > 64 || t.assignments.len() > 64)
        }
        _ => false,
    }
}

/// The whole response frame, file regions read in.
pub fn flatten(resp: &Response) -> Vec<u8> {
    resp.to_vec()
        .unwrap_or_else(|e| panic!("response names a file region that cannot be read: {e}"))
}

/// A response must be a well-formed frame: size prefix = length - 4, the request's
/// correlation id, and a body Kafka's own decoder reads completely.
pub fn check_response(request: &[u8], resp: &Response) {
    let bytes = flatten(resp);
    assert!(bytes.len() >= 8, "response of {} bytes", bytes.len());
    let size = i32::from_be_bytes(bytes[..4].try_into().unwrap());
    assert_eq!(size as usize, bytes.len() - 4, "response size prefix");
    let key = i16::from_be_bytes([request[0], request[1]]);
    let mut version = i16::from_be_bytes([request[2], request[3]]);
    let Ok(api) = ApiKey::try_from(key) else {
        panic!("response to unknown api key {key}");
    };
    let served = sluice::api::lookup(key).expect("response to an unserved key");
    if api == ApiKey::ApiVersions && version > served.max {
        version = 0; // UNSUPPORTED_VERSION answer
    }
    let mut buf = Bytes::from(bytes).slice(4..);
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .expect("response header decodes");
    let corr = i32::from_be_bytes(request[4..8].try_into().unwrap());
    assert_eq!(header.correlation_id, corr, "response correlation id");
    match ResponseKind::decode(api, &mut buf, version) {
        Ok(_) => assert!(
            !buf.has_remaining(),
            "{api:?} v{version} response has {} trailing bytes",
            buf.remaining()
        ),
        Err(e) => panic!("{api:?} v{version} response does not decode: {e}"),
    }
}
