//! The broker: configuration plus the owners of all state (the controller owns topics and
//! partitions; each partition owns its log). Handlers get an `Arc<Broker>`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::cluster::Controller;
use crate::config::BrokerConfig;
use crate::group::{Coordinator, GroupConfig, store};

pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub controller: Controller,
    /// Advertised host and port of this node.
    pub advertised: (String, u16),
    /// The consumer group coordinator; it persists through `__consumer_offsets`.
    pub groups: Arc<Coordinator>,
}

impl Broker {
    pub fn open(config: BrokerConfig) -> Result<Arc<Broker>> {
        let config = Arc::new(config);
        let controller = Controller::open(config.clone())?;
        let advertised = config.advertised();
        let group_config = GroupConfig::from_broker(&config);
        let broker = Arc::new_cyclic(|me| Broker {
            config,
            controller,
            advertised,
            groups: Coordinator::new(
                group_config,
                Arc::new(store::TopicLog { broker: me.clone() }),
            ),
        });
        // Groups and offsets are loaded before anything is served.
        broker.groups.install(store::load(&broker.controller)?);
        Ok(broker)
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// Periodic housekeeping: retention every `log.retention.check.interval.ms`.
    pub fn spawn_background(self: &Arc<Self>) {
        self.groups.start();
        let b = self.clone();
        tokio::spawn(async move {
            let every = Duration::from_millis(b.config.log_retention_check_interval_ms);
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let b2 = b.clone();
                let _ =
                    tokio::task::spawn_blocking(move || b2.controller.apply_retention(now_ms()))
                        .await;
            }
        });
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
