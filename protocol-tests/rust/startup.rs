//! Start-up: the data directory lock (a second broker on the same directory exits at once and
//! names the holder; after kill -9 a new broker starts), config/server.properties starting the
//! broker as shipped, configuration errors naming FILE:LINE, the start-up lines, and the log
//! filter variables, an open-file limit too low for the segment files kept open (the message
//! names the limit needed), and more segments than descriptors served under the bound on open
//! segment files, across a kill -9, and `sluice health` telling a broker from no broker and
//! from a port that answers something else. Every test runs the real binary.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, TestBroker, free_port, sluice_command, wait_exit, wait_ready};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

/// A broker answers ApiVersions on this port.
fn serves(port: u16) -> bool {
    let mut c = Client::connect(port);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    r.error_code == 0 && !r.api_keys.is_empty()
}

/// Runs sluice with `args` in `cwd`, stderr (its log) to `log`.
fn spawn(args: &[String], cwd: &Path, env: &[(&str, &str)], log: &Path) -> Child {
    let mut cmd = sluice_command(log);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("SLUICE_LOG")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied());
    cmd.spawn().expect("start sluice")
}

/// Waits until the broker accepts connections on `port`.
fn wait_listening(child: &mut Child, port: u16, log: &Path) {
    wait_ready(child, log, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// Waits until the log has a line containing `needle`.
fn wait_log_line(log: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(needle)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {needle:?} in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ovr(kv: &str) -> [String; 2] {
    ["--override".to_string(), kv.to_string()]
}

#[test]
fn second_broker_on_the_same_dir_exits_naming_the_dir_and_the_holder() {
    let mut first = TestBroker::start(&[]);
    let dir = first.data_dir();
    let first_pid = first.pid().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("second.log");
    let port = free_port();
    let args: Vec<String> = [
        ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")),
        ovr(&format!("log.dirs={}", dir.display())),
    ]
    .concat();
    let mut second = spawn(&args, tmp.path(), &[], &log);
    let code = wait_exit(&mut second);
    assert_eq!(code, Some(1), "second broker on one data dir");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one line, got: {text}");
    assert!(lines[0].contains(&dir.display().to_string()), "{text}");
    assert!(lines[0].contains(&format!("pid {first_pid}")), "{text}");
    assert!(lines[0].contains("in use by another broker"), "{text}");
    assert!(first.is_running());
    assert!(serves(first.port));

    // The kernel drops the lock with the process: a new broker starts after kill -9.
    first.kill9();
    let log = tmp.path().join("third.log");
    let mut third = spawn(&args, tmp.path(), &[], &log);
    wait_listening(&mut third, port, &log);
    assert!(serves(port));
    let lock = std::fs::read_to_string(dir.join(".lock")).unwrap();
    assert_eq!(lock.trim(), third.id().to_string());
    let _ = third.kill();
    let _ = third.wait();
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn shipped_config_starts_the_broker_and_start_up_lines_name_the_setup() {
    // The file as shipped, run from an empty directory (its log.dir=./data lands there); only
    // the port is moved off 9092, which other brokers on this machine may hold.
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = tmp.path().join("broker.log");
    let mut args = vec![
        "--config".to_string(),
        repo_file("config/server.properties").display().to_string(),
    ];
    args.extend(ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")));
    let mut child = spawn(&args, tmp.path(), &[], &log);
    wait_listening(&mut child, port, &log);
    assert!(serves(port));
    let line = wait_log_line(&log, "started");
    let data = std::fs::canonicalize(tmp.path()).unwrap().join("data");
    assert!(data.join(".lock").exists());
    for want in [
        "node id 1".to_string(),
        format!("data dirs {}", data.display()),
        format!("listeners PLAINTEXT://127.0.0.1:{port}"),
        format!("advertised listeners PLAINTEXT://127.0.0.1:{port}"),
    ] {
        assert!(line.contains(&want), "{want:?} not in {line:?}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("no effect"), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn config_errors_name_file_and_line_and_stop_start_up() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("s.properties");
    let port = free_port();
    let listen = format!("listeners=PLAINTEXT://127.0.0.1:{port}");
    let cases: [(&str, Vec<String>, String); 4] = [
        (
            "# a comment\nnum.io.threads=8\nno.such.key=1\n",
            vec![],
            format!("sluice: {}:3: unknown key \"no.such.key\"", conf.display()),
        ),
        (
            "num.io.threads=eight\n",
            vec![],
            format!(
                "sluice: {}:1: num.io.threads: invalid value \"eight\" (not a number of type INT)",
                conf.display()
            ),
        ),
        (
            "",
            ovr("zookeeper.connect=localhost:2181").to_vec(),
            "sluice: --override: unknown key \"zookeeper.connect\"".to_string(),
        ),
        (
            "process.roles=broker,controller\n",
            vec![],
            "sluice: controller.quorum.voters: with process.roles set, controller.quorum.voters \
             must list the controllers (id@host:port,...), or on a broker-only node \
             controller.quorum.bootstrap.servers (host:port,...)"
                .to_string(),
        ),
    ];
    for (i, (text, extra, want)) in cases.into_iter().enumerate() {
        std::fs::write(&conf, text).unwrap();
        let mut args = vec!["--config".to_string(), conf.display().to_string()];
        args.extend(ovr(&listen));
        args.extend(extra);
        let log = tmp.path().join(format!("case{i}.log"));
        let mut child = spawn(&args, tmp.path(), &[], &log);
        assert_eq!(wait_exit(&mut child), Some(1), "case {i}");
        let out = std::fs::read_to_string(&log).unwrap();
        assert_eq!(out.trim_end(), want, "case {i}");
        assert!(
            !tmp.path().join("data").exists(),
            "case {i}: data dir touched"
        );
    }
}

#[test]
fn keys_without_effect_are_named_in_one_info_line() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = tmp.path().join("broker.log");
    let args: Vec<String> = [
        ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")),
        ovr("num.network.threads=3"),
        ovr("socket.send.buffer.bytes=102400"),
        ovr("num.io.threads=8"),
    ]
    .concat();
    let mut child = spawn(&args, tmp.path(), &[], &log);
    wait_listening(&mut child, port, &log);
    let line = wait_log_line(&log, "accepted, no effect");
    assert!(line.contains("INFO"), "{line}");
    assert!(
        line.ends_with(
            "accepted, no effect: num.io.threads, num.network.threads, socket.send.buffer.bytes"
        ),
        "{line}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// SLUICE_LOG wins over RUST_LOG; either alone sets the filter.
#[test]
fn log_filter_from_sluice_log_or_rust_log() {
    let cases: [(&[(&str, &str)], bool); 4] = [
        (&[], true),
        (&[("RUST_LOG", "warn")], false),
        (&[("SLUICE_LOG", "warn")], false),
        (&[("SLUICE_LOG", "info"), ("RUST_LOG", "warn")], true),
    ];
    for (env, info_shown) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = tmp.path().join("broker.log");
        let args = ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")).to_vec();
        let mut child = spawn(&args, tmp.path(), env, &log);
        wait_listening(&mut child, port, &log);
        assert!(serves(port));
        if info_shown {
            wait_log_line(&log, "started");
        }
        // Stop cleanly: the shutdown lines are INFO too.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        assert_eq!(wait_exit(&mut child), Some(0));
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.contains(" INFO "), info_shown, "{env:?}: {text}");
    }
}

/// Runs sluice with `args`, stderr to `log`, under an open-file limit (soft and hard) of
/// `limit`.
fn spawn_limited(args: &[String], log: &Path, limit: u64) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            use nix::sys::resource::{Resource, setrlimit};
            setrlimit(Resource::RLIMIT_NOFILE, limit, limit).map_err(std::io::Error::from)
        });
    }
    cmd.spawn().expect("start sluice")
}

/// A stopped broker's data dir holding `partitions` partitions of topic `topic` (one segment
/// each), and the arguments that start a broker on it on a new port.
fn data_with_partitions(topic: &str, partitions: i32) -> (TestBroker, u16, Vec<String>) {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let req = common::create_topic_request(topic, partitions, 1, &[]);
    let r: kafka_protocol::messages::CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    let port = free_port();
    let args = [
        ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")),
        ovr(&format!("log.dirs={}", b.data_dir().display())),
    ]
    .concat();
    (b, port, args)
}

#[test]
fn too_few_file_descriptors_for_the_logs_stop_start_up_naming_the_limit_needed() {
    let (_b, port, mut args) = data_with_partitions("many", 400);
    let tmp = tempfile::tempdir().unwrap();
    // Every segment kept open (a bound above the 400 segments) under a limit of 256 the
    // broker cannot raise: they do not fit.
    args.extend(ovr("sluice.log.open.segments.max=1000"));
    let log = tmp.path().join("limited.log");
    let mut child = spawn_limited(&args, &log, 256);
    assert_eq!(wait_exit(&mut child), Some(1));
    let text = std::fs::read_to_string(&log).unwrap();
    let last = text.lines().last().unwrap_or_default();
    assert!(last.contains("Too many open files"), "{text}");
    assert!(
        last.contains("log dirs hold 400 segments, of which the broker keeps up to 400 open"),
        "{text}"
    );
    assert!(
        last.contains("the open-file limit (RLIMIT_NOFILE) is 256"),
        "{text}"
    );
    assert!(last.contains("raise it to at least 1424"), "{text}");

    // With the limit it asked for, the same data opens.
    let log = tmp.path().join("enough.log");
    let mut child = spawn_limited(&args, &log, 1424);
    wait_listening(&mut child, port, &log);
    assert!(serves(port));
    let _ = child.kill();
    let _ = child.wait();
}

/// The descriptors process `pid` holds.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn more_segments_than_file_descriptors_run_under_the_default_bound_and_survive_kill9() {
    const PARTITIONS: i32 = 400;
    let (_b, port, args) = data_with_partitions("wide", PARTITIONS);
    let tmp = tempfile::tempdir().unwrap();
    // A limit of 256: the default bound keeps at most 128 segment files open.
    let log = tmp.path().join("bounded.log");
    let mut child = spawn_limited(&args, &log, 256);
    wait_listening(&mut child, port, &log);
    let mut c = Client::connect(port);
    let value = |p: i32| format!("value of partition {p}").into_bytes();
    let mut most = 0;
    for p in 0..PARTITIONS {
        let batch = common::record_batch(&[&value(p)], 1_700_000_000_000);
        let r = common::produce_one(&mut c, "wide", p, batch);
        assert_eq!((r.error_code, r.base_offset), (0, 0), "produce to wide-{p}");
        most = most.max(open_fds(child.id()));
    }
    let read = |c: &mut Client, p: i32| {
        let resp = common::fetch_one(c, 12, "wide", uuid::Uuid::nil(), p, 0);
        let part = &resp.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "fetch of wide-{p}");
        let mut bytes = part.records.clone().unwrap_or_default();
        let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes).unwrap();
        batches
            .iter()
            .flat_map(|b| b.records.iter())
            .map(|r| r.value.clone().unwrap_or_default().to_vec())
            .collect::<Vec<_>>()
    };
    for p in (0..PARTITIONS).rev() {
        assert_eq!(read(&mut c, p), [value(p)], "wide-{p} before the kill");
        most = most.max(open_fds(child.id()));
    }
    // 128 segment files, the listener, the client, the data dir lock, the runtime's own.
    assert!(most <= 128 + 64, "the broker held {most} descriptors");
    drop(c);
    let _ = child.kill();
    let _ = child.wait();

    // kill -9, then the same limit: every acknowledged record is there.
    let log = tmp.path().join("after-kill.log");
    let mut child = spawn_limited(&args, &log, 256);
    wait_listening(&mut child, port, &log);
    let mut c = Client::connect(port);
    for p in 0..PARTITIONS {
        assert_eq!(read(&mut c, p), [value(p)], "wide-{p} after kill -9");
    }
    assert!(open_fds(child.id()) <= 128 + 64);
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs `sluice health --bootstrap ADDR`; its exit code and output (stdout, stderr).
fn health(addr: &str) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["health", "--bootstrap", addr, "--timeout", "2"])
        .stdin(Stdio::null())
        .output()
        .expect("run sluice health");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn health_exits_0_for_a_broker_and_1_for_no_broker_or_another_server() {
    let broker = TestBroker::start(&[]);
    let (code, out, _) = health(&format!("127.0.0.1:{}", broker.port));
    assert_eq!(code, Some(0), "health of a running broker: {out}");
    assert!(out.contains("answered ApiVersions"), "{out}");
    // a host name: resolved, and each of its addresses tried until one answers
    let (code, out, err) = health(&format!("localhost:{}", broker.port));
    assert_eq!(code, Some(0), "health via localhost: {out}{err}");

    // nothing listens on this port
    let free = free_port();
    let (code, _, err) = health(&format!("127.0.0.1:{free}"));
    assert_eq!(code, Some(1));
    assert!(err.contains("connect"), "{err}");

    // a server that answers, but not in Kafka's protocol
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
    });
    let (code, _, err) = health(&format!("127.0.0.1:{port}"));
    server.join().unwrap();
    assert_eq!(code, Some(1));
    assert!(err.contains("not a Kafka answer"), "{err}");

    let (code, _, err) = health("no-such-host.invalid:9092");
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot resolve"), "{err}");
}
