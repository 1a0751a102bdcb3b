//! Start-up: the data directory lock (a second broker on the same directory exits at once and
//! names the holder; after kill -9 a new broker starts), config/server.properties starting the
//! broker as shipped, configuration errors naming FILE:LINE, the start-up lines, and the log
//! filter variables, and an open-file limit too low for the logs (the message names the limit
//! needed). Every test runs the real binary.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, TestBroker, free_port};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

/// A broker answers ApiVersions on this port.
fn serves(port: u16) -> bool {
    let mut c = Client::connect(port);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    r.error_code == 0 && !r.api_keys.is_empty()
}

/// Runs sluice with `args` in `cwd`, stderr (its log) to `log`.
fn spawn(args: &[String], cwd: &Path, env: &[(&str, &str)], log: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("SLUICE_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start sluice")
}

/// Waits (up to 20 s) for the process to exit; its exit code.
fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (up to 20 s) until the broker accepts connections on `port`.
fn wait_listening(child: &mut Child, port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!(
                "sluice exited ({s}): {}",
                std::fs::read_to_string(log).unwrap()
            );
        }
        assert!(Instant::now() < deadline, "broker did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
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

#[test]
fn too_few_file_descriptors_for_the_logs_stop_start_up_naming_the_limit_needed() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let req = common::create_topic_request("many", 400, 1, &[]);
    let r: kafka_protocol::messages::CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    let dir = b.data_dir();
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let args = [
        ovr(&format!("listeners=PLAINTEXT://127.0.0.1:{port}")),
        ovr(&format!("log.dirs={}", dir.display())),
    ]
    .concat();

    // A limit of 256 the broker cannot raise: 400 segments do not fit.
    let log = tmp.path().join("limited.log");
    let mut child = spawn_limited(&args, &log, 256);
    assert_eq!(wait_exit(&mut child), Some(1));
    let text = std::fs::read_to_string(&log).unwrap();
    let last = text.lines().last().unwrap_or_default();
    assert!(last.contains("Too many open files"), "{text}");
    assert!(last.contains("the log dirs hold 400 segments"), "{text}");
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
