//! Emulators, configs and cloud-side counting shared by the integration tests.

#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orc_cloud::hetzner::ServerFilter;
use orc_cloud::vultr::InstanceFilter;
use orc_cloud::{HetznerClient, HetznerConfig, VultrClient, VultrConfig};
use orc_emu::{EmuConfig, RunningEmulators};
use orc_partner::params::{Config, MapSource, load_config};
use orc_partner_provider::{PartnerOptions, PartnerProvider, ReplicaInfo};

pub const TOKEN: &str = "demo-token";

/// The pool tenant nodes of these tests belong to, unless a test says otherwise.
pub const POOL: &str = "acme/web/api";

pub async fn emulators() -> RunningEmulators {
    EmuConfig::for_tests().start().await.unwrap()
}

pub fn vultr_root(emu: &RunningEmulators) -> String {
    emu.vultr.as_ref().unwrap().root_url()
}

/// Params for both clouds on the emulators; `owner` is the suffix of both owner tags.
pub fn source(emu: &RunningEmulators, owner: &str) -> MapSource {
    MapSource::new()
        .param("partner_id", "zone-1")
        .param("hetzner_api_token", TOKEN)
        .param("hetzner_owner_tag", &format!("orc-partner-hetzner-{owner}"))
        .param("hetzner_exchange_rate", "1.08")
        .param("vultr_api_key", TOKEN)
        .param("vultr_owner_tag", &format!("orc-partner-vultr-{owner}"))
        .var("ORC_HETZNER_ENDPOINT", &emu.hetzner_url().unwrap())
        .var("ORC_VULTR_ENDPOINT", &vultr_root(emu))
}

pub fn config(source: &MapSource) -> Config {
    load_config(source).unwrap_or_else(|e| panic!("{e}"))
}

pub fn options() -> PartnerOptions {
    PartnerOptions {
        poll_interval: Duration::from_millis(20),
        deploy_deadline: Duration::from_secs(10),
        count_retry: Duration::from_millis(100),
        ..PartnerOptions::default()
    }
}

pub fn provider(config: Config) -> PartnerProvider {
    PartnerProvider::new(
        config,
        options(),
        ReplicaInfo {
            host: "test-host".into(),
            pid: std::process::id(),
            slot: 0,
        },
    )
    .unwrap()
}

/// Instances in both emulated accounts that carry `orc-node=<node>`, whoever made them.
pub async fn count_node(emu: &RunningEmulators, node: &str) -> usize {
    let h = HetznerClient::new(HetznerConfig::new(TOKEN).with_base_url(emu.hetzner_url().unwrap()))
        .unwrap();
    let v =
        VultrClient::new(VultrConfig::new(TOKEN).with_base_url(emu.vultr_url().unwrap())).unwrap();
    let servers = h
        .list_servers(&ServerFilter {
            label_selector: Some(format!("orc-node={node}")),
            ..ServerFilter::default()
        })
        .await
        .unwrap();
    let instances = v
        .list_instances(&InstanceFilter {
            tag: Some(format!("orc-node={node}")),
            ..InstanceFilter::default()
        })
        .await
        .unwrap();
    servers.len() + instances.len()
}

pub type Shared<T> = Arc<T>;

/// A log sink for one test: everything the partner logs at INFO and above on this thread,
/// as text.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    pub fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let sink = Captured::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    (sink, tracing::subscriber::set_default(subscriber))
}

/// The addresses of a deployed node that are not on a private network.
pub fn public_of(done: &orc_proto::Deployed) -> Vec<std::net::IpAddr> {
    done.addresses
        .iter()
        .copied()
        .filter(|a| !matches!(a, std::net::IpAddr::V4(v4) if v4.is_private()))
        .collect()
}

/// The addresses of a deployed node on its site's private network.
pub fn private_of(done: &orc_proto::Deployed) -> Vec<std::net::IpAddr> {
    done.addresses
        .iter()
        .copied()
        .filter(|a| matches!(a, std::net::IpAddr::V4(v4) if v4.is_private()))
        .collect()
}
