//! The Robot provider against the Robot emulator: offers, claims, releases, power, rescue,
//! and identify + bootstrap through the SSH test double.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use orc_common::Secret;
use orc_proto::NodeId;
use orc_prov_robot::machines::{CLAIM_PREFIX, reset_for};
use orc_prov_robot::ssh::Scripted;
use orc_prov_robot::{BootstrapParams, RobotMachines, ScriptedSsh, SshOptions};
use orc_provider_sdk::ProgressSink;
use orc_provider_sdk::machine::{
    Install, MachineError, MachineKey, MachineProvider, MachineSpec, OfferQuery, PowerAction,
};
use support::*;

fn key(text: &str) -> MachineKey {
    MachineKey::new(text).unwrap()
}

fn spec(k: &str, plan: &str, location: &str) -> MachineSpec {
    MachineSpec {
        idempotency_key: key(k),
        name: k.to_string(),
        location: location.into(),
        plan: plan.into(),
        image: String::new(),
        ssh_keys: Vec::new(),
        user_data: None,
    }
}

fn quick_ssh() -> SshOptions {
    SshOptions {
        poll_interval: Duration::from_millis(5),
        rescue_wait: Duration::from_secs(5),
        ..SshOptions::default()
    }
}

struct Rig {
    emu: orc_emu::RunningEmulators,
    machines: RobotMachines,
    _dir: tempfile::TempDir,
}

async fn rig() -> Rig {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let machines = RobotMachines::new(account(dir.path(), "unused"), robot_url(&emu), quick_ssh())
        .with_listing_ttl(Duration::ZERO);
    Rig {
        emu,
        machines,
        _dir: dir,
    }
}

#[tokio::test]
async fn offers_are_the_free_servers_with_specs_from_the_product_table() {
    let rig = rig().await;
    let offers = rig.machines.offers(&OfferQuery::default()).await.unwrap();
    let seen: Vec<_> = offers
        .iter()
        .map(|o| {
            (
                o.plan.as_str(),
                o.location.as_str(),
                o.vcpus,
                o.memory_mib,
                o.available,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("EX44", "hel1", 20, 64 * 1024, true)],
        "named servers (db-1, build-arm) are never offered"
    );
    let hel1 = OfferQuery {
        location: Some("hel1".into()),
        ..OfferQuery::default()
    };
    assert_eq!(rig.machines.offers(&hel1).await.unwrap().len(), 1);
    let fsn1 = OfferQuery {
        location: Some("fsn1".into()),
        ..OfferQuery::default()
    };
    assert!(rig.machines.offers(&fsn1).await.unwrap().is_empty());
    let gpu = OfferQuery {
        gpu: true,
        ..OfferQuery::default()
    };
    assert!(
        rig.machines.offers(&gpu).await.unwrap().is_empty(),
        "no GPU product is free"
    );

    // Freeing the AX42 and the RX170 (an unknown product) offers them too.
    let robot = direct(&rig.emu);
    robot.set_server_name(AX42, "").await.unwrap();
    robot.set_server_name(RX170, "").await.unwrap();
    let offers = rig.machines.offers(&OfferQuery::default()).await.unwrap();
    let seen: Vec<_> = offers
        .iter()
        .map(|o| (o.plan.as_str(), o.location.as_str(), o.vcpus, o.memory_mib))
        .collect();
    assert_eq!(
        seen,
        [
            ("AX42", "fsn1", 16, 64 * 1024),
            ("EX44", "hel1", 20, 64 * 1024),
            ("RX170", "fsn1", 1, 1024),
        ],
        "an unknown product reports 1 vCPU and 1 GiB"
    );
}

#[tokio::test]
async fn create_claims_by_name_a_retry_finds_the_claim_and_foreign_servers_conflict() {
    let rig = rig().await;
    let robot = direct(&rig.emu);
    let first = rig
        .machines
        .create(&spec("node-a", "EX44", "hel1"))
        .await
        .unwrap();
    assert_eq!(first.instance_ref, EX44.to_string());
    assert_eq!(first.name, format!("{CLAIM_PREFIX}node-a"));
    assert_eq!(first.location, "hel1");
    assert_eq!(first.plan, "EX44");
    assert_eq!(first.addresses[0].to_string(), "198.51.100.20");
    assert_eq!(
        robot.get_server(EX44).await.unwrap().unwrap().server_name,
        "orc-node-a"
    );

    let again = rig
        .machines
        .create(&spec("node-a", "EX44", "hel1"))
        .await
        .unwrap();
    assert_eq!(again, first, "a retry finds the same claim");

    let err = rig
        .machines
        .create(&spec("node-b", "EX44", "hel1"))
        .await
        .unwrap_err();
    assert!(matches!(err, MachineError::Capacity { .. }), "{err:?}");
    let err = rig
        .machines
        .create(&spec("node-b", "AX42", "fsn1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, MachineError::Capacity { .. }),
        "db-1 is someone else's: {err:?}"
    );

    let err = rig
        .machines
        .claim_server(&key("node-b"), AX42)
        .await
        .unwrap_err();
    assert!(matches!(err, MachineError::Conflict { .. }), "{err:?}");
    let err = rig
        .machines
        .claim_server(&key("node-b"), EX44)
        .await
        .unwrap_err();
    assert!(matches!(err, MachineError::Conflict { .. }), "{err:?}");
    assert_eq!(
        robot.get_server(AX42).await.unwrap().unwrap().server_name,
        "db-1",
        "a foreign server is never renamed"
    );
    let same = rig
        .machines
        .claim_server(&key("node-a"), EX44)
        .await
        .unwrap();
    assert_eq!(same.instance_ref, first.instance_ref);

    assert_eq!(
        rig.machines.get(&key("node-a")).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(rig.machines.get(&key("node-b")).await.unwrap(), None);
    assert_eq!(rig.machines.get(&key("db-1")).await.unwrap(), None);
    let listed = rig.machines.list().await.unwrap();
    assert_eq!(listed, [first]);

    let err = rig
        .machines
        .create(&spec("has space", "EX44", "hel1"))
        .await
        .unwrap_err();
    assert!(matches!(err, MachineError::Config { .. }), "{err:?}");
}

#[tokio::test]
async fn delete_releases_the_claim_and_deactivates_rescue() {
    let rig = rig().await;
    let robot = direct(&rig.emu);
    rig.machines.create(&spec("node-a", "", "")).await.unwrap();
    rig.machines.rescue(&key("node-a")).await.unwrap();
    robot
        .activate_rescue(
            EX44,
            "linux",
            &[orc_cloud::RobotKeyFingerprint(SEED_FINGERPRINT.into())],
        )
        .await
        .unwrap();
    assert!(robot.rescue(EX44).await.unwrap().unwrap().active);

    rig.machines.delete(&key("node-a")).await.unwrap();
    let server = robot.get_server(EX44).await.unwrap().unwrap();
    assert_eq!(server.server_name, "");
    assert!(!robot.rescue(EX44).await.unwrap().unwrap().active);
    assert_eq!(rig.machines.get(&key("node-a")).await.unwrap(), None);
    let err = rig.machines.delete(&key("node-a")).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(
        rig.machines
            .offers(&OfferQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn operating_status(emu: &orc_emu::RunningEmulators) -> String {
    direct(emu)
        .reset_options(AX42)
        .await
        .unwrap()
        .unwrap()
        .operating_status
        .unwrap_or_default()
}

#[tokio::test]
async fn power_actions_become_robot_resets() {
    let table: BTreeMap<_, _> = PowerAction::ALL
        .iter()
        .map(|a| (a.as_str(), reset_for(*a).as_str()))
        .collect();
    assert_eq!(
        table,
        BTreeMap::from([
            ("cycle", "hw"),
            ("graceful-off", "power"),
            ("graceful-restart", "sw"),
            ("off", "power_long"),
            ("on", "power"),
            ("reset", "hw"),
        ])
    );

    let rig = rig().await;
    direct(&rig.emu).set_server_name(AX42, "").await.unwrap();
    let machine = rig
        .machines
        .create(&spec("node-p", "AX42", "fsn1"))
        .await
        .unwrap();
    assert_eq!(machine.instance_ref, AX42.to_string());
    let k = key("node-p");
    let resets_before = request_log(&rig.emu)
        .await
        .iter()
        .filter(|(m, p, _)| m == "POST" && p == "/reset/2001001")
        .count();

    let steps = [
        (PowerAction::Off, "stopped"),
        (PowerAction::On, "running"),
        (PowerAction::GracefulOff, "stopped"),
        (PowerAction::On, "running"),
        (PowerAction::Reset, "running"),
        (PowerAction::Cycle, "running"),
        (PowerAction::GracefulRestart, "running"),
    ];
    for (action, status) in steps {
        rig.machines.power(&k, action).await.unwrap();
        assert_eq!(operating_status(&rig.emu).await, status, "after {action}");
    }
    let resets: Vec<_> = request_log(&rig.emu)
        .await
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p == "/reset/2001001")
        .collect();
    assert_eq!(resets.len() - resets_before, steps.len());
    assert!(
        resets.iter().all(|(_, _, status)| *status == 200),
        "{resets:?}"
    );

    let err = rig
        .machines
        .power(&key("nobody"), PowerAction::On)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    // The EX44 offers sw, hw and man only: Robot refuses a long power press.
    rig.machines
        .create(&spec("node-q", "EX44", "hel1"))
        .await
        .unwrap();
    let err = rig
        .machines
        .power(&key("node-q"), PowerAction::Off)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            MachineError::Provider {
                status: Some(400),
                ..
            }
        ),
        "{err:?}"
    );
}

async fn booted_into_rescue(emu: &orc_emu::RunningEmulators, server: u64) -> bool {
    let response = reqwest::Client::new()
        .get(format!("{}/boot/{server}/rescue", robot_url(emu)))
        .basic_auth(ROBOT_USER, Some(ROBOT_PASSWORD))
        .send()
        .await
        .unwrap();
    response
        .headers()
        .get("x-emu-booted-into-rescue")
        .and_then(|v| v.to_str().ok())
        == Some("true")
}

#[tokio::test]
async fn rescue_activates_linux_with_the_account_key_and_resets_into_it() {
    let rig = rig().await;
    rig.machines
        .create(&spec("node-r", "EX44", "hel1"))
        .await
        .unwrap();
    assert!(!booted_into_rescue(&rig.emu, EX44.0).await);
    rig.machines.rescue(&key("node-r")).await.unwrap();
    assert!(booted_into_rescue(&rig.emu, EX44.0).await);
    let log = request_log(&rig.emu).await;
    let tail: Vec<_> = log
        .iter()
        .filter(|(m, _, _)| m == "POST")
        .map(|(m, p, s)| format!("{m} {p} {s}"))
        .collect();
    assert!(
        tail.ends_with(&[
            "POST /boot/2001002/rescue 200".to_string(),
            "POST /reset/2001002 200".to_string()
        ]),
        "{tail:?}"
    );
    // An activation already in force is replaced, not an error.
    direct(&rig.emu)
        .activate_rescue(EX44, "linux", &[])
        .await
        .unwrap();
    rig.machines.rescue(&key("node-r")).await.unwrap();
    assert!(booted_into_rescue(&rig.emu, EX44.0).await);
}

#[tokio::test]
async fn identify_then_bootstrap_share_one_rescue_reset_and_the_token_only_travels_as_stdin() {
    let rig = rig().await;
    rig.machines
        .create(&spec("node-b", "EX44", "hel1"))
        .await
        .unwrap();
    let k = key("node-b");
    let ssh = ScriptedSsh::new();
    ssh.on("test -x", Scripted::Unreachable)
        .on("test -x", Scripted::Unreachable)
        .on(
            "product_uuid",
            Scripted::Answer {
                exit_status: 0,
                stdout: "4C4C4544-0042-4810-8058-B4C04F4E3332\n".into(),
            },
        );
    let uuid = rig.machines.identify(&k, &ssh).await.unwrap();
    assert_eq!(uuid, "4c4c4544-0042-4810-8058-b4c04f4e3332");
    assert!(booted_into_rescue(&rig.emu, EX44.0).await);

    let params = BootstrapParams {
        join_token: Secret::new(TOKEN),
        first_boot: "#!/bin/sh\necho first boot\n".into(),
        hostname: "node-b".into(),
        ssh_keys: Vec::new(),
    };
    let report = rig.machines.bootstrap(&k, &params, &ssh).await.unwrap();
    assert!(report.reused_rescue, "identify left the server in rescue");

    let resets = request_log(&rig.emu)
        .await
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p == "/reset/2001002")
        .count();
    assert_eq!(
        resets, 2,
        "one reset into rescue for both, one into the installed system"
    );
    assert!(!booted_into_rescue(&rig.emu, EX44.0).await);
    assert!(!direct(&rig.emu).rescue(EX44).await.unwrap().unwrap().active);

    let seen = ssh.seen();
    assert!(seen.iter().all(|c| c.host == "198.51.100.20"));
    for command in &seen {
        assert!(
            !command.command.contains(TOKEN),
            "token in a command line: {}",
            command.command
        );
    }
    let carrying: Vec<_> = seen
        .iter()
        .filter(|c| contains(&c.stdin, TOKEN.as_bytes()))
        .collect();
    assert_eq!(carrying.len(), 1, "the token is sent once");
    assert!(
        carrying[0].command.starts_with("umask 077"),
        "{}",
        carrying[0].command
    );
    assert_eq!(carrying[0].stdin, TOKEN.as_bytes());
    let install = seen
        .iter()
        .find(|c| c.command == "sh -s")
        .expect("the install script ran");
    assert!(contains(&install.stdin, b"installimage"));
}

#[tokio::test]
async fn install_takes_the_token_out_of_the_zones_bootstrap_and_sends_it_once_as_stdin() {
    let rig = rig().await;
    let machine = rig
        .machines
        .create(&spec("node-i", "EX44", "hel1"))
        .await
        .unwrap();
    let ssh = ScriptedSsh::new();
    ssh.on("test -x", Scripted::Unreachable).on(
        "product_uuid",
        Scripted::Answer {
            exit_status: 0,
            stdout: "4C4C4544-0042-4810-8058-B4C04F4E3332\n".into(),
        },
    );
    let bootstrap = format!(
        "#!/bin/sh\nset -eu\nmkdir -p /etc/orc\n{}exec orc agent --join-token-file /etc/orc/join-token\n",
        orc_proto::bootstrap::token_block(TOKEN)
    );
    let install = Install {
        bootstrap: Secret::new(bootstrap),
        hostname: "node-i".into(),
        ssh_keys: vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOrc tenant".into()],
    };
    let progress = ProgressSink::discard(NodeId::new("node-i").unwrap());
    rig.machines
        .install_with(&machine, &install, &progress, &ssh)
        .await
        .unwrap();

    let seen = ssh.seen();
    let order: Vec<&str> = seen
        .iter()
        .filter_map(|c| {
            if c.command.contains("product_uuid") {
                Some("identify")
            } else if c.command.starts_with("umask 077") {
                Some("token")
            } else if c.command == "sh -s" {
                Some("install")
            } else {
                None
            }
        })
        .collect();
    assert_eq!(order, ["identify", "token", "install"]);
    let carrying: Vec<_> = seen
        .iter()
        .filter(|c| contains(&c.stdin, TOKEN.as_bytes()))
        .collect();
    assert_eq!(carrying.len(), 1, "the token is sent once");
    assert_eq!(carrying[0].stdin, TOKEN.as_bytes());
    let script = seen.iter().find(|c| c.command == "sh -s").unwrap();
    assert!(contains(&script.stdin, b"exec orc agent --join-token-file"));
    assert!(contains(&script.stdin, b"AAAAC3NzaC1lZDI1NTE5AAAAIOrc"));
    assert!(!contains(
        &script.stdin,
        orc_proto::bootstrap::TOKEN_BLOCK_START.as_bytes()
    ));
    assert!(!booted_into_rescue(&rig.emu, EX44.0).await, "rebooted");

    // A bootstrap without its token block is refused before anything is touched.
    let ssh = ScriptedSsh::new();
    let bare = Install {
        bootstrap: Secret::new("#!/bin/sh\necho nothing to join with\n"),
        ..install
    };
    let err = rig
        .machines
        .install_with(&machine, &bare, &progress, &ssh)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("join token"), "{err}");
    assert!(ssh.seen().is_empty());
}

#[tokio::test]
async fn with_install_by_the_operator_a_deploy_only_claims_the_server() {
    let rig = rig().await;
    let mut account = rig.machines.account().clone();
    account.install = orc_prov_robot::InstallMode::Operator;
    let machines = RobotMachines::new(account, robot_url(&rig.emu), quick_ssh())
        .with_listing_ttl(Duration::ZERO);
    let machine = machines
        .create(&spec("node-o", "EX44", "hel1"))
        .await
        .unwrap();
    let ssh = ScriptedSsh::new();
    let install = Install {
        bootstrap: Secret::new(format!(
            "#!/bin/sh\n{}exec orc agent\n",
            orc_proto::bootstrap::token_block(TOKEN)
        )),
        hostname: "node-o".into(),
        ssh_keys: Vec::new(),
    };
    let progress = ProgressSink::discard(NodeId::new("node-o").unwrap());
    machines
        .install_with(&machine, &install, &progress, &ssh)
        .await
        .unwrap();
    assert!(ssh.seen().is_empty(), "nothing was run: {:?}", ssh.seen());
    let listed = machines
        .get(&machine.key)
        .await
        .unwrap()
        .expect("still claimed");
    assert_eq!(listed.key, machine.key);
    assert!(
        !request_log(&rig.emu)
            .await
            .iter()
            .any(|(method, path, _)| method == "POST" && path.starts_with("/boot/")),
        "no rescue was booted"
    );
}

#[tokio::test]
async fn bootstrap_of_an_unclaimed_server_or_with_bad_params_does_nothing() {
    let rig = rig().await;
    let ssh = ScriptedSsh::new();
    let params = BootstrapParams {
        join_token: Secret::new(TOKEN),
        first_boot: "echo no interpreter line\n".into(),
        hostname: "n".into(),
        ssh_keys: Vec::new(),
    };
    let err = rig
        .machines
        .bootstrap(&key("node-x"), &params, &ssh)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("first_boot"), "{err}");
    let params = BootstrapParams {
        first_boot: "#!/bin/sh\necho first boot\n".into(),
        ..params
    };
    let err = rig
        .machines
        .bootstrap(&key("node-x"), &params, &ssh)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(ssh.seen().is_empty());
}

#[tokio::test]
async fn a_rotated_password_is_read_on_the_next_request_and_never_shown() {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let machines = RobotMachines::new(account(dir.path(), "unused"), robot_url(&emu), quick_ssh())
        .with_listing_ttl(Duration::ZERO);
    assert_eq!(machines.list().await.unwrap(), []);
    std::fs::write(dir.path().join("robot-password"), "wrong-Pa55word\n").unwrap();
    let err = machines.list().await.unwrap_err();
    assert!(matches!(err, MachineError::Config { .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("wrong-Pa55word"));
    std::fs::write(dir.path().join("robot-password"), ROBOT_PASSWORD).unwrap();
    assert_eq!(machines.list().await.unwrap(), []);
    std::fs::remove_file(dir.path().join("robot-password")).unwrap();
    let err = machines.list().await.unwrap_err();
    assert!(err.to_string().contains("robot-password"), "{err}");
}

#[tokio::test]
async fn reads_reuse_a_recent_listing_and_changes_drop_it() {
    let emu = robot_emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let machines = RobotMachines::new(account(dir.path(), "unused"), robot_url(&emu), quick_ssh())
        .with_listing_ttl(Duration::from_secs(3600));
    let listings = |log: &[(String, String, u16)]| {
        log.iter()
            .filter(|(m, p, _)| m == "GET" && p == "/server")
            .count()
    };
    assert_eq!(
        machines.offers(&OfferQuery::default()).await.unwrap().len(),
        1
    );
    assert_eq!(machines.list().await.unwrap(), []);
    assert_eq!(machines.get(&key("node-c")).await.unwrap(), None);
    assert_eq!(
        listings(&request_log(&emu).await),
        1,
        "one listing served three reads"
    );

    let claimed = machines
        .create(&spec("node-c", "EX44", "hel1"))
        .await
        .unwrap();
    assert_eq!(
        listings(&request_log(&emu).await),
        2,
        "a claim reads Robot afresh"
    );
    assert_eq!(
        machines.list().await.unwrap(),
        [claimed],
        "the claim shows at once"
    );
    assert!(
        machines
            .offers(&OfferQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    machines.delete(&key("node-c")).await.unwrap();
    assert_eq!(
        machines.list().await.unwrap(),
        [],
        "the release shows at once"
    );
}
