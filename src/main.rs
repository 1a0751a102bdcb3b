//! `sluice`: run a Kafka-compatible broker.
//!
//! With no arguments it serves PLAINTEXT on localhost:9092 with its data in ./data.
//! `--config FILE` reads Kafka broker properties; `--override key=value` (repeatable) sets one.
//! `sluice health [--bootstrap HOST:PORT]` checks that a broker answers ApiVersions (exit 0)
//! or not (exit 1): a container health check.
//! `sluice faults add|list|remove` manages the faults injected into a broker started with
//! `sluice.faults.enable=true`, through its HTTP port (`sluice::faults::client`).
//! `sluice verify --bootstrap B --topic T --acked FILE` checks a topic against a producer's
//! acked-records log (VerifiableProducer's JSON lines): exit 0 when nothing acked is lost and
//! nothing is duplicated, 1 otherwise (`sluice::verify`).
//! `--kafka-env` reads the environment as the apache/kafka container image does (`KAFKA_*`
//! variables over the file, `CLUSTER_ID`, the JAAS file in `KAFKA_OPTS`; see
//! `sluice::config::env`).
//! Log filter: `SLUICE_LOG`, else `RUST_LOG` (tracing-subscriber's EnvFilter syntax, e.g.
//! `info,sluice::group=debug`), else `info`; when both are set, `SLUICE_LOG` wins.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tracing::{error, info};

use sluice::config::BrokerConfig;

#[derive(Parser, Debug)]
#[command(name = "sluice", version, about = "A Kafka-compatible message broker")]
struct Args {
    /// Kafka-style server.properties file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set one property, as key=value (repeatable); applied after --config.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Read the environment as the apache/kafka image does: KAFKA_* variables as properties
    /// (over --config, under --override), CLUSTER_ID formats the log dirs, KAFKA_OPTS may name
    /// a JAAS file; with neither a file nor a variable, the image's single-node defaults.
    #[arg(long)]
    kafka_env: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Exit 0 if the broker answers an ApiVersions request, 1 if not (a health check).
    Health {
        /// The broker to ask, as host:port; every address the host resolves to is tried.
        #[arg(long, value_name = "HOST:PORT", default_value = "localhost:9092")]
        bootstrap: String,
        /// Seconds to wait for the connection, and then for the answer.
        #[arg(long, value_name = "SECONDS", default_value_t = 3)]
        timeout: u64,
    },
    /// Inject, list and remove faults on a broker started with sluice.faults.enable=true
    /// (through its HTTP port).
    Faults(Box<sluice::faults::client::FaultsArgs>),
    /// Check a topic against a producer's acked-records log (VerifiableProducer's JSON
    /// lines): lost, duplicated, moved and reordered records; exit 1 if any is lost or
    /// duplicated.
    Verify(Box<sluice::verify::VerifyArgs>),
}

/// `sluice verify`: the report on stdout; exit 0 when nothing is lost or duplicated, 1 when
/// something is, 2 when the check could not be made.
fn verify(args: &sluice::verify::VerifyArgs) -> ! {
    match args.run() {
        Ok(r) => {
            if args.json {
                let v = sluice::verify::render_json(&args.topic, &r);
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print!(
                    "{}",
                    sluice::verify::render_text(&args.topic, &r, args.show)
                );
            }
            std::process::exit(if r.ok() { 0 } else { 1 })
        }
        Err(e) => {
            eprintln!("sluice verify: {e:#}");
            std::process::exit(2)
        }
    }
}

/// `sluice faults`: the broker's JSON answer on stdout, or its refusal on stderr (exit 1).
fn faults(args: &sluice::faults::client::FaultsArgs) -> ! {
    match args.run() {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("sluice faults: {e:#}");
            std::process::exit(1)
        }
    }
}

/// `sluice health`: one line on stdout when the broker answers, on stderr when not.
fn health(bootstrap: &str, timeout: u64) -> ! {
    match sluice::health::check(bootstrap, Duration::from_secs(timeout.max(1))) {
        Ok((addr, keys)) => {
            println!("sluice health: {addr} answered ApiVersions ({keys} APIs)");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("sluice health: {e}");
            std::process::exit(1)
        }
    }
}

fn main() {
    sluice::alloc::keep_large_buffers();
    let args = Args::parse();
    if let Some(Command::Health { bootstrap, timeout }) = &args.command {
        health(bootstrap, *timeout);
    }
    if let Some(Command::Faults(f)) = &args.command {
        faults(f);
    }
    if let Some(Command::Verify(v)) = &args.command {
        verify(v);
    }
    init_logging();
    let config = if args.kafka_env {
        load_kafka_env(&args)
    } else {
        match BrokerConfig::load(args.config.as_deref(), &args.overrides) {
            Ok(c) => c,
            Err(e) => fail(&format!("{e:#}")),
        }
    };
    if !config.no_effect.is_empty() {
        info!("accepted, no effect: {}", config.no_effect.join(", "));
    }
    raise_fd_limit();
    sluice::log::open_files::set_limit(open_segments_limit(config.open_segments_max));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start runtime: {e}")));
    let code = rt.block_on(run(config));
    rt.shutdown_timeout(Duration::from_millis(200));
    std::process::exit(code);
}

/// `--kafka-env`: the configuration from the file, the environment and the overrides, and
/// the log dirs formatted with the environment's cluster id, as the apache/kafka image does
/// before it starts the broker.
fn load_kafka_env(args: &Args) -> BrokerConfig {
    use sluice::config::env;
    let (config, kafka_env) =
        match env::load(args.config.as_deref(), &args.overrides, std::env::vars_os()) {
            Ok(c) => c,
            Err(e) => fail(&format!("{e:#}")),
        };
    if args.config.is_none() && kafka_env.settings.is_empty() {
        info!("no KAFKA_* variable and no --config: the apache/kafka image's default single node");
    }
    if !kafka_env.skipped.is_empty() {
        info!(
            "read by the apache/kafka image's launch scripts only, skipped: {}",
            kafka_env.skipped.join(", ")
        );
    }
    match sluice::cluster::controller::format_dirs(&config, &kafka_env.cluster_id) {
        Ok(dirs) => {
            for d in dirs {
                info!(
                    "formatted {} with cluster id {}",
                    d.display(),
                    kafka_env.cluster_id
                );
            }
        }
        Err(e) => fail(&format!("{e:#}")),
    }
    config
}

/// The log filter from `SLUICE_LOG`, else `RUST_LOG`, else `info`. A filter that does not
/// parse is reported and `info` is used.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let (var, spec) = ["SLUICE_LOG", "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().map(|s| (*v, s)))
        // openraft reports every election step at INFO and WARN; its errors are enough.
        .unwrap_or(("", "info,openraft=error".to_string()));
    let (filter, bad) = match EnvFilter::try_new(&spec) {
        Ok(f) => (f, None),
        Err(e) => (EnvFilter::new("info"), Some(e)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter_reloading();
    let handle = builder.reload_handle();
    builder.init();
    // Broker loggers (kafka-configs --entity-type broker-loggers) change the filter at run time.
    let start = if bad.is_some() { "info" } else { spec.as_str() };
    sluice::logging::install(
        start,
        Box::new(move |spec| {
            let f = EnvFilter::try_new(spec).map_err(|e| e.to_string())?;
            handle.reload(f).map_err(|e| e.to_string())
        }),
    );
    if let Some(e) = bad {
        tracing::warn!("{var}={spec:?} is not a log filter ({e}); using info");
    }
}

/// Each segment holds a file descriptor and each client a socket: raise the soft limit on
/// open files to the hard limit, as Kafka's documentation asks operators to do.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
    }
}

/// The bound on open segment files: `configured`, or with 0 half of the open-file limit
/// (the rest for connections, indexes being written, checkpoints).
fn open_segments_limit(configured: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    if configured > 0 {
        return configured;
    }
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) if soft != nix::sys::resource::RLIM_INFINITY => (soft / 2).max(64) as usize,
        _ => sluice::log::open_files::UNBOUNDED,
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("sluice: {msg}");
    std::process::exit(1);
}

async fn run(config: BrokerConfig) -> i32 {
    // SIGTERM and SIGINT are caught from the start: one that arrives while the node starts
    // is answered by a clean shutdown once it has started.
    let mut signals = Signals::install();
    let node = match sluice::run::start(config).await {
        Ok(n) => n,
        Err(e) => fail(&format!("{e:#}")),
    };
    let signal = signals.recv().await;
    info!("shutting down");
    // SIGTERM moves a cluster broker's leaderships away first (controlled shutdown).
    match node.stop(signal == "SIGTERM").await {
        Ok(()) => {
            info!("shut down cleanly");
            0
        }
        Err(e) => {
            error!("{e:#}");
            1
        }
    }
}

/// The shutdown signals, caught from the moment they are installed.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        Signals {
            term: signal(SignalKind::terminate()).expect("SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("SIGINT handler"),
        }
    }

    /// Waits for the first of them; returns its name.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
