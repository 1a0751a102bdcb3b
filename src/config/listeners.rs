//! Listeners as the configuration names them: the Kafka listeners (`listeners`,
//! `advertised.listeners`, `listener.security.protocol.map`, the names that
//! `listener.name.<name>.*` keys refer to) and the HTTP server's listener.

use std::collections::BTreeMap;

use anyhow::Result;

use super::keys::{SECURITY_PROTOCOLS, default_of};
use super::{ClusterConfig, Props, Setting};

/// A listener as written in `listeners` / `advertised.listeners`: `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    /// Empty means all interfaces (when binding) or this machine's name (when advertising).
    pub host: String,
    pub port: u16,
}

impl Listener {
    pub fn bind_addr(&self) -> String {
        bind_addr(&self.host, self.port)
    }
}

/// The address to bind for `host` (empty: all interfaces) and `port`.
fn bind_addr(host: &str, port: u16) -> String {
    format_host_port(if host.is_empty() { "0.0.0.0" } else { host }, port)
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}",
            self.name,
            format_host_port(&self.host, self.port)
        )
    }
}

/// `host:port`, an IPv6 host in brackets.
pub fn format_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The HTTP server's address, from `http://host:port` (an empty host binds all interfaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpListener {
    pub host: String,
    pub port: u16,
}

impl HttpListener {
    pub fn bind_addr(&self) -> String {
        bind_addr(&self.host, self.port)
    }

    pub(super) fn parse(p: &Props) -> Result<Option<HttpListener>> {
        let key = "sluice.http.server.listeners";
        let items: Vec<&str> = p
            .get(key)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let item = match items[..] {
            [] => return Ok(None),
            [one] => one,
            _ => return Err(p.err(key, "one listener only (http://host:port)")),
        };
        let Some(rest) = item.strip_prefix("http://") else {
            return Err(p.err(key, format!("{item:?} is not of the form http://host:port")));
        };
        let (host, port) = match rest.strip_prefix('[') {
            Some(r) => r.split_once("]:"),
            None => rest.rsplit_once(':'),
        }
        .ok_or_else(|| p.err(key, format!("{item:?} has no port")))?;
        let port: u16 = port
            .parse()
            .map_err(|_| p.err(key, format!("{item:?} has an invalid port {port:?}")))?;
        Ok(Some(HttpListener {
            host: host.to_string(),
            port,
        }))
    }
}

/// `NAME:PROTOCOL,...` with upper-cased names, as Kafka normalises listener names.
pub(super) fn parse_protocol_map(p: &Props) -> Result<BTreeMap<String, String>> {
    let key = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for item in p
        .get(key)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (name, proto) = item
            .split_once(':')
            .ok_or_else(|| p.err(key, format!("{item:?} is not of the form NAME:PROTOCOL")))?;
        let proto = proto.trim().to_ascii_uppercase();
        if !SECURITY_PROTOCOLS.contains(&proto.as_str()) {
            return Err(p.err(key, format!("{proto:?} is not a security protocol")));
        }
        map.insert(name.trim().to_ascii_uppercase(), proto);
    }
    Ok(map)
}

pub(super) fn parse_listeners(p: &Props, key: &str) -> Result<Vec<Listener>> {
    let mut out: Vec<Listener> = Vec::new();
    for item in p
        .get(key)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| p.err(key, format!("{item:?} is not of the form NAME://host:port")))?;
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, port) = r
                .split_once("]:")
                .ok_or_else(|| p.err(key, format!("{item:?} has a bad IPv6 address")))?;
            (h.to_string(), port)
        } else {
            let (h, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| p.err(key, format!("{item:?} has no port")))?;
            (h.to_string(), port)
        };
        let port: u16 = port
            .parse()
            .map_err(|_| p.err(key, format!("{item:?} has an invalid port {port:?}")))?;
        let name = name.to_ascii_uppercase();
        if out.iter().any(|l| l.name == name) {
            return Err(p.err(key, format!("listener name {name} is used twice")));
        }
        out.push(Listener { name, host, port });
    }
    if out.is_empty() {
        return Err(p.err(key, "no listener given"));
    }
    Ok(out)
}

/// Listener names in the final `listeners` value, for `listener.name.<name>.*` keys.
pub(super) fn listener_names(settings: &[Setting]) -> Vec<String> {
    let value = settings
        .iter()
        .rev()
        .find(|s| s.key == "listeners")
        .map(|s| s.value.as_str())
        .or_else(|| default_of("listeners"))
        .unwrap_or("");
    value
        .split(',')
        .filter_map(|l| l.split_once("://"))
        .map(|(n, _)| n.trim().to_ascii_uppercase())
        .collect()
}

/// Kafka's rule for `listeners`: each listener has a port of its own, except that one IPv4
/// and one IPv6 address may share a port.
pub(super) fn check_distinct_ports(p: &Props, listeners: &[Listener]) -> Result<()> {
    for (i, a) in listeners.iter().enumerate() {
        for b in &listeners[i + 1..] {
            let v6 = |l: &Listener| l.host.parse::<std::net::Ipv6Addr>().is_ok();
            let v4 = |l: &Listener| l.host.parse::<std::net::Ipv4Addr>().is_ok();
            let one_of_each = (v4(a) && v6(b)) || (v6(a) && v4(b));
            if a.port == b.port && a.port != 0 && !one_of_each {
                return Err(p.err(
                    "listeners",
                    format!(
                        "each listener must have a different port: {a} and {b} both use {}",
                        a.port
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The listeners this broker advertises to clients: `advertised.listeners` when set (each one
/// a listener of this broker, the controller listener left out as Kafka does), else the
/// broker's listeners themselves.
pub(super) fn advertised_listeners(
    p: &Props,
    listeners: &[Listener],
    cluster: Option<&ClusterConfig>,
) -> Result<Vec<Listener>> {
    if !p.is_set("advertised.listeners") {
        return Ok(listeners.to_vec());
    }
    let controller = cluster
        .and_then(|c| c.controller_listener.as_ref())
        .map(|l| l.name.as_str());
    let mut adv = parse_listeners(p, "advertised.listeners")?;
    adv.retain(|a| Some(a.name.as_str()) != controller);
    for a in &adv {
        if !listeners.iter().any(|l| l.name == a.name) {
            let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
            return Err(p.err(
                "advertised.listeners",
                format!(
                    "listener {} is not one of the listeners (the listeners are {})",
                    a.name,
                    names.join(",")
                ),
            ));
        }
        if a.host == "0.0.0.0" || a.host == "::" {
            return Err(p.err(
                "advertised.listeners",
                format!(
                    "{a} is the non-routable meta-address: advertise an address clients can \
                     reach"
                ),
            ));
        }
    }
    Ok(adv)
}

/// As Kafka: the listener the brokers replicate through (`inter.broker.listener.name`, or
/// the listener named after `security.inter.broker.protocol`) must be an advertised one,
/// since the other brokers connect to it.
pub(super) fn check_inter_broker_listener(
    p: &Props,
    advertised: &[Listener],
    cluster: Option<&ClusterConfig>,
) -> Result<()> {
    let (key, name) = match cluster {
        Some(c) if !c.roles.broker => return Ok(()),
        Some(c) if !c.inter_broker_listener.is_empty() && !c.one_voter => {
            let key = if p.given("security.inter.broker.protocol") {
                "security.inter.broker.protocol"
            } else {
                "inter.broker.listener.name"
            };
            (key, c.inter_broker_listener.clone())
        }
        _ if p.is_set("inter.broker.listener.name") => (
            "inter.broker.listener.name",
            p.get("inter.broker.listener.name")
                .trim()
                .to_ascii_uppercase(),
        ),
        _ if p.given("security.inter.broker.protocol") => (
            "security.inter.broker.protocol",
            p.get("security.inter.broker.protocol")
                .trim()
                .to_ascii_uppercase(),
        ),
        _ => return Ok(()),
    };
    if advertised.iter().any(|l| l.name == name) {
        return Ok(());
    }
    let names: Vec<&str> = advertised.iter().map(|l| l.name.as_str()).collect();
    Err(p.err(
        key,
        format!(
            "{name} must be a listener defined in advertised.listeners (the advertised \
             listeners are {})",
            names.join(",")
        ),
    ))
}

/// Kafka's default for the controller listeners in KRaft: when `listener.security.protocol.map`
/// is not given, `process.roles` is set and no listener is named SSL or SASL_*, each controller
/// listener maps to PLAINTEXT. Adds them to `map` and returns the map's effective value when it
/// changed.
pub(super) fn implied_controller_protocols(
    p: &Props,
    map: &mut BTreeMap<String, String>,
) -> Option<String> {
    if p.given("listener.security.protocol.map") || !p.is_set("process.roles") {
        return None;
    }
    let secured = |n: &str| matches!(n, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
    let controllers: Vec<String> = p
        .get("controller.listener.names")
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    let listener_names: Vec<String> = p
        .get("listeners")
        .split(',')
        .filter_map(|l| l.split_once("://"))
        .map(|(n, _)| n.trim().to_ascii_uppercase())
        .collect();
    if controllers
        .iter()
        .chain(&listener_names)
        .any(|n| secured(n))
    {
        return None;
    }
    let mut changed = false;
    for c in controllers {
        if !map.contains_key(&c) {
            map.insert(c, "PLAINTEXT".to_string());
            changed = true;
        }
    }
    changed.then(|| {
        map.iter()
            .map(|(n, proto)| format!("{n}:{proto}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}
