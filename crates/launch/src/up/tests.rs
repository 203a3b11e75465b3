use std::os::unix::fs::PermissionsExt as _;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;

use orc_zone::model::{Endpoint, Name};
use orc_zone::store::Store;

use super::binaries::partner_binary;
use super::providers::partner_app;
use super::publish::{name, partner_manifest, standalone_manifest};
use super::start::{check_port, running_nodes};
use super::*;
use crate::args::{AcmeArgs, EdgeArgs, ListenArgs, MeshArgs, TlsArgs};

/// The params the partner declares sensitive: its cloud keys, as its manifest says.
fn partner_sensitive_params() -> BTreeSet<String> {
    partner_manifest().sensitive_params()
}

/// The partner's admin page: its one http endpoint, which the access edge serves as
/// `sys--partner.sys.<domain>`; its manifest declares it.
fn partner_endpoints() -> Vec<Endpoint> {
    partner_manifest()
        .endpoints
        .into_iter()
        .map(|e| Endpoint {
            name: e.name,
            protocol: e.protocol,
            port: e.port,
        })
        .collect()
}

#[test]
fn the_partner_declares_each_cloud_key_sensitive_and_up_sends_them_so() {
    let keys: BTreeSet<String> = orc_partner::ids::Cloud::ALL
        .iter()
        .map(|cloud| cloud.key_param().to_string())
        .collect();
    assert_eq!(partner_sensitive_params(), keys);
    let app = partner_app("https://127.0.0.1:7070");
    assert!(app.params.keys().all(|name| !keys.contains(name)));
    assert_eq!(
        app.params["access_keys_url"],
        "https://127.0.0.1:7070/.well-known/orc-access/jwks.json"
    );
    assert!(
        !partner_app("http://127.0.0.1:7070")
            .params
            .contains_key("access_keys_url"),
        "a plain zone keeps the page closed rather than give the partner an http URL"
    );
    assert_eq!(
        app.sensitive.0.keys().cloned().collect::<BTreeSet<_>>(),
        keys
    );
}

#[test]
fn every_provider_manifest_declares_what_its_binary_reads() {
    let partner = partner_manifest();
    partner.validate(&name(PARTNER_APP).unwrap()).unwrap();
    let declared: Vec<String> = partner.params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(declared, orc_partner::params::all_param_names());
    let json: Vec<&str> = partner
        .params
        .iter()
        .filter(|p| p.json)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(json, ["regions", "os_map", "gateway"]);
    assert_eq!(
        partner.required_names(),
        ["partner_id"],
        "only partner_id is needed whatever the clouds"
    );
    for binary in [
        "orc-prov-hetzner",
        "orc-prov-vultr",
        "orc-prov-robot",
        "orc-prov-static",
    ] {
        let manifest = standalone_manifest(binary).unwrap();
        manifest.validate(&name(binary).unwrap()).unwrap();
        assert!(
            manifest.sensitive_params().is_empty(),
            "{binary} names its secrets by reference"
        );
    }
}

fn args(dir: &Path, partner: &Path) -> UpArgs {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    UpArgs {
        data_dir: Some(dir.join("data")),
        zone: ZoneArgs {
            http: any,
            grpc: any,
            tls: TlsArgs {
                plain: false,
                tls_names: Vec::new(),
            },
            listen: ListenArgs {
                max_connections_per_source: None,
            },
            edge: EdgeArgs {
                edge: any,
                edge_domain: orc_web::edge::DEFAULT_DOMAIN.to_string(),
                edge_public_port: None,
                no_edge: false,
                web_url: None,
            },
            mesh: MeshArgs {
                mesh_range: orc_mesh::range::DEFAULT_RANGE.parse().unwrap(),
                mesh_project_prefix: orc_mesh::range::DEFAULT_PROJECT_PREFIX_LEN,
                workload_range: orc_mesh::range::DEFAULT_WORKLOAD_RANGE.parse().unwrap(),
                workload_prefix: orc_mesh::range::DEFAULT_WORKLOAD_PREFIX_LEN,
            },
            acme: AcmeArgs::default(),
        },
        hetzner_emu: any,
        vultr_emu: any,
        robot_emu: any,
        partner_bin: Some(partner.to_path_buf()),
        providers_bin: Some(partner.to_path_buf()),
        partner_wait: 30,
        netns: false,
    }
}

/// Waits until the reconcilers have had the core provider start both slots.
async fn wait_until_running(store: &Store, pool: &Pool) {
    for _ in 0..600 {
        if running_nodes(store, pool).await == PARTNER_REPLICAS as usize {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the partner slots never ran");
}

#[tokio::test]
async fn up_starts_the_zone_with_the_partner_pool_and_resumes_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let partner = dir.path().join("fake-partner");
    std::fs::write(&partner, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&partner, std::fs::Permissions::from_mode(0o755)).unwrap();
    let steps = std::sync::Mutex::new(Vec::new());
    let report = |w: &str| steps.lock().unwrap().push(w.to_string());

    let up = Up::start(&args(dir.path(), &partner), &report)
        .await
        .unwrap();
    assert!(up.pool_created);
    let token = up.zone.admin_token().expose().to_string();
    let health = orc_testkit::zone::client_of(&up.zone)
        .get(format!("{}/api/orgs", up.zone.url()))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success(), "{}", health.status());
    let summary = up.summary(true);
    assert!(summary.contains(&up.zone.url()), "{summary}");
    assert!(
        summary.contains(&token),
        "a new token is shown once: {summary}"
    );
    let logged = up.summary(false);
    assert!(!logged.contains(&token), "{logged}");
    assert!(logged.contains("token     in "), "{logged}");
    let sys: Name = "sys".parse().unwrap();
    let pool = up
        .zone
        .store()
        .pool_by_path(&sys, &sys, &name(PARTNER_POOL).unwrap())
        .await
        .unwrap();
    assert_eq!(pool.size, PARTNER_REPLICAS);
    let app = pool.spec.app.clone().unwrap();
    let wanted = partner_app(up.zone.web_url());
    assert_eq!(
        (&app.package, &app.params, &app.sensitive),
        (&wanted.package, &wanted.params, &wanted.sensitive)
    );
    assert!(app.digest.is_some(), "the pool runs a published package");
    assert_eq!(pool.spec.endpoints, partner_endpoints());
    wait_until_running(up.zone.store(), &pool).await;
    // Attack: read a secret from another process's command line or environment. No
    // process `orc up` starts carries the admin token, the emulators' credential or the
    // rescue key there (they reach slots as files in their runtime dirs).
    let rescue_key =
        std::fs::read_to_string(dir.path().join("data/secrets/robot-rescue-key")).unwrap();
    let rescue_line = rescue_key.lines().nth(1).unwrap().to_string();
    let pids: Vec<u32> = up
        .zone
        .apps()
        .slots()
        .await
        .iter()
        .filter_map(|slot| slot.pid)
        .collect();
    assert!(pids.len() >= PARTNER_REPLICAS as usize, "{pids:?}");
    for pid in pids {
        for file in ["cmdline", "environ"] {
            let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            for secret in [token.as_str(), EMULATOR_TOKEN, rescue_line.as_str()] {
                assert!(!text.contains(secret), "/proc/{pid}/{file} holds a secret");
            }
        }
    }
    assert_eq!(
        steps.lock().unwrap()[..11],
        [
            "starting the cloud emulators",
            "preparing the emulated accounts",
            "starting the zone",
            "publishing sys/orc-prov-partner:default",
            "creating pool sys/sys/partner",
            "publishing sys/orc-prov-hetzner:default",
            "creating pool sys/sys/hetzner",
            "publishing sys/orc-prov-vultr:default",
            "creating pool sys/sys/vultr",
            "publishing sys/orc-prov-robot:default",
            "creating pool sys/sys/robot",
        ]
    );
    // The standalone providers' accounts name their secrets by reference only.
    let robot = up
        .zone
        .store()
        .pool_by_path(&sys, &sys, &name("robot").unwrap())
        .await
        .unwrap();
    let account = &robot.spec.app.as_ref().unwrap().params["account"];
    assert!(account.contains("param://"), "{account}");
    assert!(!account.contains(EMULATOR_TOKEN), "{account}");
    assert!(
        account.contains(r#""install":"operator""#),
        "without --netns Robot servers are records only, never SSHed into: {account}"
    );
    let secrets = dir.path().join("data/secrets");
    let mode = std::fs::metadata(secrets.join("robot-rescue-key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let key_before = std::fs::read_to_string(secrets.join("robot-rescue-key.pub")).unwrap();
    // The API's address is part of the partner's params (its access_keys_url): the same
    // address again changes nothing.
    let http = up.zone.http_addr();
    up.shutdown().await;

    let mut same_address = args(dir.path(), &partner);
    same_address.zone.http = http;
    let again = Up::start(&same_address, &report).await.unwrap();
    assert!(!again.pool_created);
    wait_until_running(again.zone.store(), &pool).await;
    let pools = again
        .zone
        .store()
        .list_pools(&orc_zone::model::sys_project_id())
        .await
        .unwrap();
    let partners: Vec<_> = pools
        .iter()
        .filter(|p| p.name.as_str() == PARTNER_POOL)
        .collect();
    assert_eq!(partners.len(), 1);
    assert_eq!(partners[0].id, pool.id);
    assert_eq!(partners[0].generation, pool.generation);
    assert!(
        !again.summary(true).contains(&token),
        "the token is shown only once"
    );
    assert_eq!(
        std::fs::read_to_string(secrets.join("robot-rescue-key.pub")).unwrap(),
        key_before,
        "the rescue key is kept across runs"
    );
    again.shutdown().await;
}

#[test]
fn a_missing_partner_binary_and_a_taken_port_are_named() {
    let error = partner_binary(Some(Path::new("/nonexistent/orc-prov-partner")))
        .unwrap_err()
        .to_string();
    assert!(error.contains("does not exist"), "{error}");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let error = check_port("the zone API", taken.local_addr().unwrap())
        .unwrap_err()
        .to_string();
    assert!(error.contains("in use"), "{error}");
}
