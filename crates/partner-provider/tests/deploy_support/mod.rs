//! Quotes, deploys and a census of every cloud resource, shared by the deploy, site and
//! gateway tests.

#![allow(dead_code)]

use std::collections::BTreeMap;

use orc_cloud::hetzner::{ServerFilter, SshKeyFilter};
use orc_cloud::vultr::InstanceFilter;
use orc_cloud::{HetznerClient, HetznerConfig, VultrClient, VultrConfig};
use orc_emu::RunningEmulators;
use orc_partner_provider::PartnerProvider;
use orc_proto::{Bootstrap, Deploy, DeployResult, NodeId, OsId, Quote, QuoteReply, QuoteToken};
use orc_provider_sdk::{ProgressSink, Provider};

use crate::support::TOKEN;

pub const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkxbq0XPwVbYb2oZfhIfxXvqqxVGbAIbR2l4vXQdQ5Y ops@example";

pub async fn offer(p: &PartnerProvider, q: Quote) -> orc_proto::Offer {
    match p.quote(q).await {
        QuoteReply::Offer(offer) => offer,
        QuoteReply::Refused(r) => panic!("refused: {r}"),
    }
}

pub async fn deploy_os(
    p: &PartnerProvider,
    node: &str,
    token: QuoteToken,
    os: &str,
) -> DeployResult {
    let node = NodeId::new(node).unwrap();
    p.deploy(
        Deploy {
            node_id: node.clone(),
            quote_token: token,
            os: OsId::new(os).unwrap(),
            ssh_keys: vec![KEY.into()],
            bootstrap: Bootstrap(b"#!/bin/sh\necho joined\n".to_vec()),
        },
        ProgressSink::discard(node),
    )
    .await
}

pub async fn deploy(p: &PartnerProvider, node: &str, token: QuoteToken) -> DeployResult {
    deploy_os(p, node, token, "ubuntu-24.04").await
}

pub fn deployed(result: DeployResult) -> orc_proto::Deployed {
    match result {
        DeployResult::Deployed(done) => done,
        DeployResult::Refused(r) => panic!("deploy refused: {r}"),
    }
}

pub fn refusal(result: DeployResult) -> orc_proto::Refusal {
    match result {
        DeployResult::Refused(r) => r,
        DeployResult::Deployed(d) => panic!("deployed although a failure was injected: {d:?}"),
    }
}

/// Quotes and deploys one node, answering the result.
pub async fn place(p: &PartnerProvider, q: Quote) -> orc_proto::Deployed {
    let node = q.node_id.as_str().to_string();
    let os = q.os.as_str().to_string();
    let o = offer(p, q).await;
    deployed(deploy_os(p, &node, o.quote_token, &os).await)
}

pub fn hetzner(emu: &RunningEmulators) -> HetznerClient {
    HetznerClient::new(HetznerConfig::new(TOKEN).with_base_url(emu.hetzner_url().unwrap())).unwrap()
}

pub fn vultr(emu: &RunningEmulators) -> VultrClient {
    VultrClient::new(VultrConfig::new(TOKEN).with_base_url(emu.vultr_url().unwrap())).unwrap()
}

/// How many of each resource both emulated accounts hold, whoever made them.
pub async fn census(emu: &RunningEmulators) -> BTreeMap<&'static str, usize> {
    let h = hetzner(emu);
    let v = vultr(emu);
    let mut out = BTreeMap::new();
    out.insert(
        "hetzner servers",
        h.list_servers(&ServerFilter::default())
            .await
            .unwrap()
            .len(),
    );
    out.insert(
        "hetzner networks",
        h.list_networks(None).await.unwrap().len(),
    );
    out.insert(
        "hetzner primary ips",
        h.list_primary_ips(None).await.unwrap().len(),
    );
    out.insert(
        "hetzner floating ips",
        h.list_floating_ips(None).await.unwrap().len(),
    );
    out.insert("hetzner volumes", h.list_volumes(None).await.unwrap().len());
    out.insert(
        "hetzner ssh keys",
        h.list_ssh_keys(&SshKeyFilter::default())
            .await
            .unwrap()
            .len(),
    );
    out.insert(
        "vultr instances",
        v.list_instances(&InstanceFilter::default())
            .await
            .unwrap()
            .len(),
    );
    out.insert("vultr vpcs", v.list_vpcs().await.unwrap().len());
    out.insert(
        "vultr reserved ips",
        v.list_reserved_ips().await.unwrap().len(),
    );
    out.insert("vultr blocks", v.list_blocks().await.unwrap().len());
    out.insert("vultr ssh keys", v.list_ssh_keys().await.unwrap().len());
    out
}

/// What `census` holds now beyond `base` (only kinds that changed; a kind with fewer than
/// at `base` shows as a negative count).
pub async fn added(
    emu: &RunningEmulators,
    base: &BTreeMap<&'static str, usize>,
) -> BTreeMap<&'static str, i64> {
    census(emu)
        .await
        .into_iter()
        .filter_map(|(k, n)| {
            let was = base.get(k).copied().unwrap_or(0);
            let diff = i64::try_from(n).unwrap() - i64::try_from(was).unwrap();
            (diff != 0).then_some((k, diff))
        })
        .collect()
}

/// The expected `added` answer.
pub fn expect(counts: &[(&'static str, i64)]) -> BTreeMap<&'static str, i64> {
    counts.iter().copied().filter(|(_, n)| *n != 0).collect()
}
