//! The Robot client against the Robot emulator: servers, resets, rescue, keys, rDNS, basic
//! auth and Robot's 403 rate limit.

mod common;

use orc_cloud::robot::{OneOrMany, ResetType};
use orc_cloud::{CloudError, RobotClient, RobotConfig, RobotServerNumber};
use orc_testkit::EmuControl;

use common::*;

const DB1: RobotServerNumber = RobotServerNumber(2001001);
const EX44: RobotServerNumber = RobotServerNumber(2001002);
const V6_ONLY: RobotServerNumber = RobotServerNumber(2001003);

#[tokio::test]
async fn servers_list_get_and_rename() {
    let emu = start().await;
    let client = robot(&emu);
    let servers = client.list_servers().await.unwrap();
    let numbers: Vec<_> = servers.iter().map(|s| s.server_number).collect();
    assert_eq!(numbers, [DB1, EX44, V6_ONLY]);
    let v6 = servers.iter().find(|s| s.server_number == V6_ONLY).unwrap();
    assert_eq!(v6.server_ip, None);

    let db1 = client.get_server(DB1).await.unwrap().expect("exists");
    assert_eq!(db1.product, "AX42");
    assert_eq!(db1.reset, Some(true));
    assert!(
        client
            .get_server(RobotServerNumber(999))
            .await
            .unwrap()
            .is_none()
    );

    let renamed = client.set_server_name(EX44, "worker-2").await.unwrap();
    assert_eq!(renamed.server_name, "worker-2");
    assert_eq!(
        client.get_server(EX44).await.unwrap().unwrap().server_name,
        "worker-2"
    );
    let err = client
        .set_server_name(RobotServerNumber(999), "x")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn resets_follow_each_servers_menu() {
    let emu = start().await;
    let client = robot(&emu);
    let options = client
        .reset_options(DB1)
        .await
        .unwrap()
        .expect("has resets");
    assert_eq!(
        options.types,
        [
            ResetType::Sw,
            ResetType::Hw,
            ResetType::Man,
            ResetType::Power,
            ResetType::PowerLong
        ]
    );
    for kind in [
        ResetType::Sw,
        ResetType::Hw,
        ResetType::Power,
        ResetType::PowerLong,
    ] {
        let done = client.reset(DB1, kind).await.unwrap();
        assert_eq!((done.server_number, done.kind), (DB1, kind));
    }
    let options = client.reset_options(V6_ONLY).await.unwrap().unwrap();
    assert_eq!(options.types, [ResetType::Hw, ResetType::Man]);
    let err = client.reset(V6_ONLY, ResetType::Sw).await.unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 400, .. }),
        "{err:?}"
    );
    assert!(
        client
            .reset_options(RobotServerNumber(999))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn rescue_activation_with_keys_and_a_hidden_password() {
    let emu = start().await;
    let client = robot(&emu);
    let keys = client.list_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    let inactive = client.rescue(DB1).await.unwrap().expect("exists");
    assert!(!inactive.active);
    assert!(matches!(inactive.os, OneOrMany::Many(_)));

    let active = client
        .activate_rescue(DB1, "linux", &[keys[0].fingerprint.clone()])
        .await
        .unwrap();
    assert!(active.active);
    assert_eq!(active.os, OneOrMany::One("linux".into()));
    assert_eq!(active.authorized_key.len(), 1);
    assert_eq!(active.authorized_key[0].fingerprint, keys[0].fingerprint);
    let password = active.password.clone().expect("shown once");
    assert!(!password.expose().is_empty());
    assert!(!format!("{active:?}").contains(password.expose()));

    let now = client.rescue(DB1).await.unwrap().unwrap();
    assert!(now.active);
    let off = client.deactivate_rescue(DB1).await.unwrap();
    assert!(!off.active);
    assert!(
        client
            .rescue(RobotServerNumber(999))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn keys_and_the_empty_list_that_is_a_404() {
    let emu = start().await;
    let client = robot(&emu);
    let created = client
        .create_key("deploy", &ssh_public_key(42))
        .await
        .unwrap();
    assert_eq!(created.name, "deploy");
    let keys = client.list_keys().await.unwrap();
    assert_eq!(keys.len(), 2);
    for key in &keys {
        client.delete_key(&key.fingerprint).await.unwrap();
    }
    assert!(client.list_keys().await.unwrap().is_empty());
    assert_eq!(client.counters().get("robot.keys.list"), 2);
    let err = client.delete_key(&created.fingerprint).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn reverse_dns_entries() {
    let emu = start().await;
    let client = robot(&emu);
    let ip = "198.51.100.10";
    assert!(client.get_rdns(ip).await.unwrap().is_none());
    let created = client.create_rdns(ip, "db-1.example.org").await.unwrap();
    assert_eq!(created.ptr, "db-1.example.org");
    let err = client
        .create_rdns(ip, "again.example.org")
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 409, .. }),
        "{err:?}"
    );
    let updated = client.update_rdns(ip, "db-one.example.org").await.unwrap();
    assert_eq!(updated.ptr, "db-one.example.org");
    assert_eq!(
        client.get_rdns(ip).await.unwrap().unwrap().ptr,
        "db-one.example.org"
    );
    client.delete_rdns(ip).await.unwrap();
    assert!(client.get_rdns(ip).await.unwrap().is_none());
    assert!(client.delete_rdns(ip).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn basic_auth_is_required_and_the_password_never_shows() {
    let emu = start().await;
    let url = emu.robot_url().unwrap();
    let wrong =
        RobotClient::new(RobotConfig::new(ROBOT_USER, "not-the-password").with_base_url(url))
            .unwrap();
    let err = wrong.list_servers().await.unwrap_err();
    assert!(
        matches!(err, CloudError::Provider { status: 401, .. }),
        "{err:?}"
    );
    assert!(!format!("{err:?} {err}").contains("not-the-password"));
    assert!(!format!("{wrong:?}").contains("not-the-password"));
    let right = robot(&emu);
    assert_eq!(right.list_servers().await.unwrap().len(), 3);
    assert!(!format!("{right:?}").contains(SECRET));
}

#[tokio::test]
async fn the_403_rate_limit_is_retried_when_short() {
    let emu = start().await;
    let client = robot(&emu);
    // 3600 an hour: Robot reports interval 3600 and max_request 3600, one second per request.
    EmuControl::robot(&emu)
        .rate_limit(3600, 3600.0, Some(0))
        .await;
    assert_eq!(client.list_servers().await.unwrap().len(), 3);
    assert_eq!(client.counters().get("robot.servers.list"), 2);
}

#[tokio::test]
async fn the_403_rate_limit_is_reported_when_long() {
    let emu = start().await;
    let client = robot(&emu);
    EmuControl::robot(&emu)
        .rate_limit(200, 3600.0, Some(0))
        .await;
    let err = client.list_servers().await.unwrap_err();
    match &err {
        CloudError::RateLimited { retry_after, .. } => {
            assert_eq!(retry_after.as_secs(), 18);
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(client.counters().get("robot.servers.list"), 1);
}
