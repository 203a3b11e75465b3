//! Tenant node deploys against the emulators: extra disks created with the node (a failure
//! right after a disk converges) and deleted with it, one pool's nodes on two clouds after a
//! stockout, and caps holding under 50 concurrent quotes and deploys.

mod deploy_support;
mod support;

use std::sync::Arc;

use deploy_support::*;
use orc_proto::{DestroyResult, NodeId, Quote, QuoteReply, RefusalKind};
use orc_provider_sdk::Provider;
use orc_testkit::emu::{EmuControl, Fault};
use orc_testkit::proto::quote_in;
use support::*;

fn with_disks(q: Quote, disks: &[u32]) -> Quote {
    let mut q = q;
    q.shape.disks_gib = disks.to_vec();
    q
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_disks_come_and_go_with_their_node_on_both_clouds() {
    let emu = emulators().await;
    let base = census(&emu).await;
    let p = provider(config(&source(&emu, "a")));
    let h = place(
        &p,
        with_disks(quote_in(POOL, "n-disk-h", "eu-central", 2, 4), &[20, 30]),
    )
    .await;
    let v = place(
        &p,
        with_disks(quote_in(POOL, "n-disk-v", "us-east", 2, 4), &[40]),
    )
    .await;
    assert!(h.instance_ref.as_str().starts_with("hetzner:"));
    assert!(v.instance_ref.as_str().starts_with("vultr:"));
    let volumes = hetzner(&emu)
        .list_volumes(Some("orc-node=n-disk-h"))
        .await
        .unwrap();
    let mut sizes: Vec<u64> = volumes.iter().map(|v| v.size).collect();
    sizes.sort();
    assert_eq!(sizes, [20, 30]);
    let server: u64 = h.instance_ref.as_str()["hetzner:".len()..].parse().unwrap();
    assert!(
        volumes
            .iter()
            .all(|v| v.server.map(|s| s.0) == Some(server))
    );
    let blocks = vultr(&emu).list_blocks().await.unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].size_gb, 40);
    assert_eq!(
        blocks[0].attached_to_instance.as_deref(),
        Some(&v.instance_ref.as_str()["vultr:".len()..])
    );
    // Deploying again makes no second disk.
    let o = offer(
        &p,
        with_disks(quote_in(POOL, "n-disk-h", "eu-central", 2, 4), &[20, 30]),
    )
    .await;
    deployed(deploy(&p, "n-disk-h", o.quote_token).await);
    assert_eq!(
        added(&emu, &base).await,
        expect(&[
            ("hetzner servers", 1),
            ("hetzner networks", 1),
            ("hetzner primary ips", 1),
            ("hetzner ssh keys", 1),
            ("hetzner volumes", 2),
            ("vultr instances", 1),
            ("vultr vpcs", 1),
            ("vultr reserved ips", 1),
            ("vultr ssh keys", 1),
            ("vultr blocks", 1),
        ])
    );
    for node in ["n-disk-h", "n-disk-v"] {
        assert_eq!(
            p.destroy(NodeId::new(node).unwrap()).await,
            DestroyResult::Destroyed
        );
    }
    let after = added(&emu, &base).await;
    assert_eq!(after.get("hetzner volumes"), None, "{after:?}");
    assert_eq!(after.get("vultr blocks"), None, "{after:?}");
    assert_eq!(after.get("hetzner servers"), None, "{after:?}");
}

/// A failure right after a disk is created (its attach) and one right after the node is
/// created (the disk create): each retry finishes with exactly the disks asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_the_node_or_a_disk_converges() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let control = EmuControl::vultr(&emu);
    let o = offer(
        &p,
        with_disks(quote_in(POOL, "n-dv", "us-east", 2, 4), &[10, 15]),
    )
    .await;
    control
        .fault(Fault::new("/v2/blocks/", 503, 5).method("POST"))
        .await;
    let r = refusal(deploy(&p, "n-dv", o.quote_token.clone()).await);
    assert_eq!(r.kind, RefusalKind::Transient, "{r}");
    assert_eq!(
        vultr(&emu).list_blocks().await.unwrap().len(),
        1,
        "created, not attached"
    );
    control.clear_faults().await;
    let done = deployed(deploy(&p, "n-dv", o.quote_token.clone()).await);
    deployed(deploy(&p, "n-dv", o.quote_token).await);
    let blocks = vultr(&emu).list_blocks().await.unwrap();
    let id = &done.instance_ref.as_str()["vultr:".len()..];
    assert_eq!(blocks.len(), 2);
    assert!(
        blocks
            .iter()
            .all(|b| b.attached_to_instance.as_deref() == Some(id))
    );

    let hetzner_control = EmuControl::hetzner(&emu);
    let o = offer(
        &p,
        with_disks(quote_in(POOL, "n-dh", "eu-central", 2, 4), &[10]),
    )
    .await;
    hetzner_control
        .fault(Fault::new("/v1/volumes", 503, 5).method("POST"))
        .await;
    let r = refusal(deploy(&p, "n-dh", o.quote_token.clone()).await);
    assert_eq!(r.kind, RefusalKind::Transient, "{r}");
    hetzner_control.clear_faults().await;
    deployed(deploy(&p, "n-dh", o.quote_token.clone()).await);
    deployed(deploy(&p, "n-dh", o.quote_token).await);
    assert_eq!(hetzner(&emu).list_volumes(None).await.unwrap().len(), 1);
    assert_eq!(count_node(&emu, "n-dh").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pools_nodes_land_on_two_clouds_when_a_stockout_moves_one() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let first = place(&p, quote_in(POOL, "n-pool-1", "eu-central", 2, 4)).await;
    assert_eq!(first.site.as_str(), "eu-central-a");
    let o = offer(&p, quote_in(POOL, "n-pool-2", "eu-central", 2, 4)).await;
    let token = orc_partner_provider::token::OfferToken::decode(o.quote_token.as_str()).unwrap();
    for location in ["fsn1", "nbg1"] {
        EmuControl::hetzner(&emu)
            .sold_out(&token.plan, location, true)
            .await;
    }
    let r = refusal(deploy(&p, "n-pool-2", o.quote_token).await);
    assert_eq!(r.kind, RefusalKind::NoCapacity);
    // The zone quotes the node again; each refused site sits out, so it moves on.
    let mut refused_sites = vec![o.site.as_str().to_string()];
    let moved = loop {
        let again = offer(&p, quote_in(POOL, "n-pool-2", "eu-central", 2, 4)).await;
        assert!(!refused_sites.contains(&again.site.as_str().to_string()));
        match deploy(&p, "n-pool-2", again.quote_token).await {
            orc_proto::DeployResult::Deployed(done) => break done,
            orc_proto::DeployResult::Refused(r) => {
                assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}");
                refused_sites.push(again.site.as_str().to_string());
            }
        }
    };
    assert_eq!(moved.site.as_str(), "eu-central-c");
    assert!(moved.instance_ref.as_str().starts_with("vultr:"));
    let inventory = p.inventory().await.unwrap();
    let sites: Vec<&str> = inventory.sites.iter().map(|s| s.site.as_str()).collect();
    assert!(
        sites.contains(&"eu-central-a") && sites.contains(&"eu-central-c"),
        "{sites:?}"
    );
}

/// A create the cloud refuses outright fails in generic words, and one it has no room for
/// sits the site out; the operator's INFO line says which, naming node and site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_creates_tell_the_operator_why() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    let (logs, _guard) = capture();
    let control = EmuControl::hetzner(&emu);

    let o = offer(&p, quote_in(POOL, "n-rejected", "eu-central", 2, 4)).await;
    let site = o.site.as_str().to_string();
    control
        .fault(
            Fault::new("/v1/servers", 422, 1)
                .method("POST")
                .code("invalid_input")
                .message("unsupported server type"),
        )
        .await;
    let r = refusal(deploy(&p, "n-rejected", o.quote_token).await);
    control.clear_faults().await;
    assert_eq!(r.kind, RefusalKind::Failed, "{r}");
    assert_eq!(
        r.words,
        orc_partner::words::could_not_create("n-rejected", &site)
    );
    assert!(r.words.contains("could not be created") && r.words.ends_with("this time"));
    let line = logs
        .text()
        .lines()
        .find(|l| l.contains("The node could not be created at this site"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no INFO line for the failed create:\n{}", logs.text()));
    assert!(line.contains(" INFO "), "{line}");
    assert!(
        line.contains("node=n-rejected") && line.contains(&format!("site={site}")),
        "{line}"
    );
    assert!(
        !line.contains("unsupported server type"),
        "the cloud's words go to DEBUG"
    );

    let o = offer(&p, quote_in(POOL, "n-no-room", "eu-central", 2, 4)).await;
    let token = orc_partner_provider::token::OfferToken::decode(o.quote_token.as_str()).unwrap();
    control.sold_out(&token.plan, &token.location, true).await;
    let r = refusal(deploy(&p, "n-no-room", o.quote_token).await);
    assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}");
    let line = logs
        .text()
        .lines()
        .find(|l| {
            l.contains(
                "The cloud has no room for this node here right now; the site sits out quotes for ten minutes",
            )
        })
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no INFO line for the sold-out create:\n{}", logs.text()));
    assert!(line.contains(" INFO "), "{line}");
    assert!(
        line.contains("node=n-no-room") && line.contains(&format!("site={}", token.site)),
        "{line}"
    );
    let again = offer(&p, quote_in(POOL, "n-no-room", "eu-central", 2, 4)).await;
    assert_ne!(again.site.as_str(), token.site, "the site sits out quotes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_hold_under_fifty_concurrent_quotes_and_deploys() {
    let emu = emulators().await;
    let p = Arc::new(provider(config(
        &source(&emu, "a")
            .param("hetzner_max_nodes", "4")
            .param("vultr_max_nodes", "3"),
    )));
    p.on_role(orc_proto::ReplicaRole::Serving);
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while [
            orc_partner::ids::Cloud::Hetzner,
            orc_partner::ids::Cloud::Vultr,
        ]
        .iter()
        .any(|c| p.quote_state().count_status(*c) != Some(orc_partner::state::CountStatus::Counted))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("n-cc-{i}");
            match p.quote(quote_in(POOL, &node, "eu-central", 2, 4)).await {
                QuoteReply::Offer(o) => Some(deploy(&p, &node, o.quote_token).await),
                QuoteReply::Refused(r) => {
                    assert_eq!(r.kind, RefusalKind::NoCapacity, "{r}");
                    None
                }
            }
        }));
    }
    let mut placed = 0;
    for task in tasks {
        if let Some(result) = task.await.unwrap() {
            deployed(result);
            placed += 1;
        }
    }
    assert_eq!(placed, 7, "every node the caps allow, and no more");
    let h = hetzner(&emu)
        .list_servers(&orc_cloud::hetzner::ServerFilter {
            label_selector: Some("orc-role=node".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(h.len(), 4);
    let v = vultr(&emu)
        .list_instances(&orc_cloud::vultr::InstanceFilter {
            tag: Some("orc-role=node".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(v.len(), 3);
}

/// Through the zone's side of the stream: a deploy that opens a site sends its progress in
/// tenant words (no cloud, plan or location), and a deploy into the open site does not
/// prepare the site again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_report_progress_in_tenant_words() {
    use orc_provider_sdk::harness::ZoneHarness;
    use orc_provider_sdk::{ProviderRunner, RunnerOptions};

    let emu = emulators().await;
    let harness = ZoneHarness::grpc().await.unwrap();
    let runner = ProviderRunner::new(
        &harness.endpoint().unwrap(),
        Arc::new(provider(config(&source(&emu, "a")))),
        RunnerOptions::default(),
    )
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    let conn = harness.accept().await.unwrap();
    conn.welcome(orc_proto::ReplicaRole::Serving).await.unwrap();
    let mut notes = Vec::new();
    for node in ["n-prog-1", "n-prog-2"] {
        let q = with_disks(quote_in(POOL, node, "eu-central", 2, 4), &[10]);
        let o = match conn.quote(q).await.unwrap() {
            QuoteReply::Offer(o) => o,
            QuoteReply::Refused(r) => panic!("refused: {r}"),
        };
        let outcome = conn
            .deploy(orc_proto::Deploy {
                node_id: NodeId::new(node).unwrap(),
                quote_token: o.quote_token,
                os: orc_proto::OsId::new("ubuntu-24.04").unwrap(),
                ssh_keys: vec![],
                bootstrap: orc_proto::Bootstrap(Vec::new()),
            })
            .await
            .unwrap();
        deployed(outcome.result);
        notes.push(
            outcome
                .progress
                .into_iter()
                .map(|p| p.words)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        notes[0],
        [
            "preparing site eu-central-a",
            "creating the machine",
            "attaching the extra disks"
        ]
    );
    assert_eq!(
        notes[1],
        ["creating the machine", "attaching the extra disks"]
    );
    for words in notes.iter().flatten() {
        for cloud_word in ["hetzner", "vultr", "fsn1", "cx", "Falkenstein"] {
            assert!(
                !words.to_lowercase().contains(&cloud_word.to_lowercase()),
                "{words}"
            );
        }
    }
    let _ = stop.send(());
    let _ = running.await;
}

/// A destroy that fails right after the disks went (the server delete) is retried and
/// finishes: no server and no disk left, and a destroy of the absent node still succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_destroy_converges_on_retry() {
    let emu = emulators().await;
    let p = provider(config(&source(&emu, "a")));
    place(
        &p,
        with_disks(quote_in(POOL, "n-int", "eu-central", 2, 4), &[10, 10]),
    )
    .await;
    let control = EmuControl::hetzner(&emu);
    control
        .fault(Fault::new("/v1/servers/", 503, 5).method("DELETE"))
        .await;
    let first = p.destroy(NodeId::new("n-int").unwrap()).await;
    assert!(
        matches!(&first, DestroyResult::Refused(r) if r.kind == RefusalKind::Transient),
        "{first:?}"
    );
    assert_eq!(
        count_node(&emu, "n-int").await,
        1,
        "the server is still there"
    );
    assert!(
        hetzner(&emu).list_volumes(None).await.unwrap().is_empty(),
        "the disks went first"
    );
    control.clear_faults().await;
    for _ in 0..2 {
        assert_eq!(
            p.destroy(NodeId::new("n-int").unwrap()).await,
            DestroyResult::Destroyed
        );
    }
    assert_eq!(count_node(&emu, "n-int").await, 0);
}
