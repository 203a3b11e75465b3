//! The mesh range at start: a zone refuses a range that overlaps another range of its world,
//! or that no longer holds a project's prefix, and says which.

use orc_zone::mesh::MeshOptions;
use orc_zone::model::{Timestamp, sys_project_id};
use orc_zone::store::{MeshMemberKind, NewMeshMember};
use orc_zone::zone::{Zone, ZoneConfig};

/// The error and every cause, one per line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push('\n');
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test]
async fn a_mesh_range_overlapping_a_reserved_range_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = ZoneConfig::ephemeral(tmp.path().join("zone"));
    config.mesh = MeshOptions {
        range: orc_mesh::MeshRange::parse("10.64.0.0/10", 24).unwrap(),
        workloads: Some(orc_mesh::WorkloadRange::parse("10.200.0.0/16", 24).unwrap()),
        reserved: vec![(
            "the partner's site range".to_string(),
            "10.128.0.0/10".parse().unwrap(),
        )],
        ..Default::default()
    };
    // 10.64.0.0/10 and 10.128.0.0/10 are neighbours: the zone starts.
    let zone = Zone::start(config.clone()).await.unwrap();
    zone.shutdown().await;

    // A workload range inside the mesh range, or too small for a project, is refused too.
    let mut inside = config.clone();
    inside.mesh.workloads = Some(orc_mesh::WorkloadRange::parse("10.96.0.0/16", 24).unwrap());
    let text = chain(&Zone::start(inside).await.unwrap_err());
    assert!(
        text.contains(
            "the workload range 10.96.0.0/16 overlaps the mesh range 10.64.0.0/10; \
             choose ranges that do not overlap"
        ),
        "{text}"
    );
    let mut small = config.clone();
    small.mesh.workloads = Some(orc_mesh::WorkloadRange::parse("10.200.0.0/20", 24).unwrap());
    let text = chain(&Zone::start(small).await.unwrap_err());
    assert!(text.contains("holds 16 node subnets of /24"), "{text}");

    config.mesh.range = orc_mesh::MeshRange::parse("10.0.0.0/8", 24).unwrap();
    config.mesh.workloads = None;
    let err = Zone::start(config).await.unwrap_err();
    let text = chain(&err);
    assert!(text.contains("the mesh range cannot be used"), "{text}");
    assert!(
        text.contains(
            "the mesh range 10.0.0.0/8 overlaps the partner's site range 10.128.0.0/10; \
             choose ranges that do not overlap"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_mesh_range_that_no_longer_holds_a_project_prefix_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zone");
    let zone = Zone::start(ZoneConfig::ephemeral(&dir)).await.unwrap();
    let member = NewMeshMember {
        id: "ws-ann".into(),
        kind: MeshMemberKind::Workstation,
        project_id: sys_project_id(),
        name: "ann".into(),
        public_key: None,
    };
    let placed = zone
        .store()
        .ensure_mesh_member(&member, &MeshOptions::default().range, Timestamp::now())
        .await
        .unwrap()
        .expect("an address");
    assert!(
        placed.address.to_string().starts_with("10.88.0."),
        "{placed:?}"
    );
    zone.shutdown().await;

    let mut config = ZoneConfig::ephemeral(&dir);
    config.mesh.range = orc_mesh::MeshRange::parse("10.99.0.0/16", 24).unwrap();
    let text = chain(&Zone::start(config.clone()).await.unwrap_err());
    assert!(
        text.contains(&format!(
            "project {} has mesh prefix 10.88.0.0/24, which the mesh range \
             (10.99.0.0/16 split into /24 per project) does not hold",
            sys_project_id()
        )),
        "{text}"
    );
    // The same range with another project prefix length does not hold it either.
    config.mesh.range = orc_mesh::MeshRange::parse("10.88.0.0/16", 25).unwrap();
    let text = chain(&Zone::start(config.clone()).await.unwrap_err());
    assert!(text.contains("has mesh prefix 10.88.0.0/24"), "{text}");
    // The range it was made with starts.
    config.mesh.range = orc_mesh::MeshRange::default();
    Zone::start(config).await.unwrap().shutdown().await;
}
