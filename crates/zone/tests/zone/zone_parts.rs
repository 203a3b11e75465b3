//! The zone's parts started one at a time, as `Zone::start` starts them: the store with what
//! lives in it, and the listeners.

use orc_zone::zone::parts::{Listeners, StorePart, load_ca};
use orc_zone::zone::{ZoneConfig, ZoneError, prepare_data_dir};
use orc_zone_api_types::data_dir::ADMIN_TOKEN_FILE;

#[tokio::test]
async fn the_store_part_opens_alone_and_keeps_its_operator_across_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("zone");
    let config = ZoneConfig::ephemeral(&data_dir);
    prepare_data_dir(&data_dir).unwrap();

    let first = StorePart::open(&config).await.unwrap();
    assert!(first.admin_token_is_new);
    let on_disk = std::fs::read_to_string(data_dir.join(ADMIN_TOKEN_FILE)).unwrap();
    assert_eq!(on_disk.trim(), first.admin_token.expose());
    let admin = first
        .store
        .user_by_name(&"admin".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(admin.name.as_str(), "admin");
    let now = orc_common::time::Timestamp::now();
    let keys = first.access_keys.list(now).await.unwrap();
    assert_eq!(keys.len(), 1, "one signing key is made on the first start");
    first.store.close().await;

    // A second start finds all of it: the same token, the same key.
    let again = StorePart::open(&config).await.unwrap();
    assert!(!again.admin_token_is_new);
    assert_eq!(again.admin_token.expose(), first.admin_token.expose());
    let kept = again.access_keys.list(now).await.unwrap();
    assert_eq!(kept[0].kid, keys[0].kid);
    again.store.close().await;
}

#[tokio::test]
async fn the_listeners_bind_alone_and_a_taken_port_names_its_listener() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ZoneConfig::ephemeral(dir.path().join("zone"));
    prepare_data_dir(&config.data_dir).unwrap();
    let ca = load_ca(&config).unwrap_or_else(|e| panic!("{e}"));
    // `ephemeral` asks for free ports everywhere.
    let bound = Listeners::bind(&config, ca.is_some()).await.unwrap();
    assert_ne!(bound.http.1.port(), 0);
    assert_ne!(bound.grpc.1.port(), 0);
    assert_eq!(bound.edge.is_some(), config.edge.is_some() && ca.is_some());

    let taken = bound.http.1;
    config.grpc_addr = taken;
    config.http_addr = "127.0.0.1:0".parse().unwrap();
    match Listeners::bind(&config, ca.is_some()).await {
        Err(ZoneError::Bind { what, addr, .. }) => {
            assert_eq!(what, "provider gRPC endpoint");
            assert_eq!(addr, taken);
        }
        other => panic!("a taken port: {other:?}"),
    }
}
