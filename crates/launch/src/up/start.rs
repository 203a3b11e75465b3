//! Starting, restarting and stopping what `orc up` runs.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use orc_emu::{Account, Accounts, ClockMode, EmuConfig, Timings};
use orc_zone::apps::AppsConfig;
use orc_zone::model::{AppSpec, Name, NodeState, Pool};
use orc_zone::store::Store;

use orc_zone::certificates::AcmeConfig;
use orc_zone::zone::{Zone, ZoneConfig};

use super::binaries::{partner_binary, provider_binary};
use super::providers::{
    STATIC_HOSTS, StandaloneUrls, partner_app, standalone_providers, static_provider,
};
use super::publish::{
    Published, ensure_app_pool, manifest_running, name, partner_manifest, standalone_manifest,
    widen_and_price_partner, zone_client,
};
use super::secrets::Secrets;
use super::{
    EMULATED_ACME_CA_FILE, EMULATOR_ACCOUNT, EMULATOR_ROTATED_TOKEN, EMULATOR_TOKEN, PARTNER_APP,
    PARTNER_POOL, PARTNER_REPLICAS, PARTNER_RESOURCE, UP_INVENTORY_SECS, UP_LOST_REPLACE_AFTER, Up,
    UpArgs,
};

impl Up {
    /// Starts the emulators, the zone and the partner pool, reporting each step.
    pub async fn start(args: &UpArgs, report: &dyn Fn(&str)) -> anyhow::Result<Up> {
        let data_dir = args
            .data_dir
            .clone()
            .unwrap_or_else(orc_zone_api_types::data_dir::default_data_dir);
        check_data_dir(&data_dir)?;
        let (partner, partner_args) = partner_binary(args.partner_bin.as_deref())?;
        for (what, addr) in [
            ("the zone API", args.zone.http),
            ("the provider endpoint", args.zone.grpc),
            ("the Hetzner Cloud emulator", args.hetzner_emu),
            ("the Vultr emulator", args.vultr_emu),
            ("the Robot emulator", args.robot_emu),
        ] {
            check_port(what, addr)?;
        }
        if !args.zone.edge.no_edge && !args.zone.tls.plain {
            check_port("the access edge", args.zone.edge.edge)?;
        }

        let fabric = if args.netns {
            report("building the emulated internet (network namespaces)");
            let binary = std::env::current_exe().context("cannot find this orc binary")?;
            let fabric = orc_emu::netns::Fabric::create(Some(binary))
                .context("--netns (materialised emulators)")?;
            Some(std::sync::Arc::new(fabric))
        } else {
            None
        };
        // The emulated internet's ACME server, which certificates for apps' domains come
        // from unless told otherwise.
        let acme = match &fabric {
            Some(fabric) if args.zone.acme.acme_directory.is_none() && !args.zone.acme.no_acme => {
                if orc_emu::netns::acme_available() {
                    report("starting the emulated internet's ACME server (pebble)");
                    let server = fabric
                        .start_acme()
                        .context("cannot start the emulated ACME server")?;
                    let ca_file = data_dir.join(EMULATED_ACME_CA_FILE);
                    std::fs::write(&ca_file, &server.ca_pem)
                        .with_context(|| format!("cannot write {}", ca_file.display()))?;
                    Some(server)
                } else {
                    report(
                        "no ACME server: pebble is not installed (apt install pebble); apps' domains are served over plain HTTP",
                    );
                    None
                }
            }
            _ => None,
        };

        report("starting the cloud emulators");
        let emulators = EmuConfig {
            hetzner: Some(args.hetzner_emu),
            vultr: Some(args.vultr_emu),
            robot: Some(args.robot_emu),
            accounts: Accounts::new(vec![
                Account {
                    name: EMULATOR_ACCOUNT.to_string(),
                    secret: EMULATOR_TOKEN.to_string(),
                },
                // A second key of the same account, so a key rotation can be tried.
                Account {
                    name: EMULATOR_ACCOUNT.to_string(),
                    secret: EMULATOR_ROTATED_TOKEN.to_string(),
                },
            ]),
            clock_mode: ClockMode::Auto,
            timings: Timings::realistic(),
            hetzner_options: Default::default(),
            fabric: fabric.clone(),
        }
        .start()
        .await
        .context("cannot start the cloud emulators")?;
        let (Some(hetzner_url), Some(vultr_url), Some(robot_url)) = (
            emulators.hetzner_url(),
            emulators.vultr_url(),
            emulators.robot_url(),
        ) else {
            bail!("the cloud emulators started without their URLs");
        };

        report("preparing the emulated accounts");
        let secrets = Secrets::prepare(&data_dir)?;
        let rescue_fingerprint = secrets
            .register_rescue_key(&robot_url)
            .await
            .context("cannot store the rescue key in the Robot emulator")?;
        let static_hosts = match &fabric {
            Some(fabric) => {
                report("starting the static hosts (namespaces with sshd)");
                let (fabric, public) = (fabric.clone(), secrets.static_public.clone());
                let hosts = tokio::task::spawn_blocking(move || {
                    orc_emu::static_hosts::StaticHosts::start(fabric, &STATIC_HOSTS, &[public])
                })
                .await
                .context("the static hosts' start was cancelled")?
                .context("cannot start the static hosts")?;
                Some(hosts)
            }
            None => None,
        };
        let mut standalone = standalone_providers(
            &secrets,
            &StandaloneUrls {
                hetzner: hetzner_url.clone(),
                vultr: vultr_url.clone(),
                robot: robot_url,
                // Without --netns a Robot server is a record only, with nothing to SSH into:
                // its deploys claim it and leave the install to the operator.
                robot_installs: fabric.is_some(),
            },
            &rescue_fingerprint,
        );
        if let Some(hosts) = &static_hosts {
            standalone.push(static_provider(&secrets, hosts));
        }

        report("starting the zone");
        let mut apps = AppsConfig::default();
        // Where the partner finds the emulated clouds: the operator's environment for its
        // slots, not a param of its package.
        apps.env.insert(
            PARTNER_APP.to_string(),
            BTreeMap::from([
                ("ORC_HETZNER_ENDPOINT".to_string(), hetzner_url),
                ("ORC_VULTR_ENDPOINT".to_string(), vultr_url),
                // Sites open and close on screen within seconds, not a minute.
                (
                    "ORC_INVENTORY_SECS".to_string(),
                    UP_INVENTORY_SECS.to_string(),
                ),
            ]),
        );
        let mut published = vec![Published {
            pool: PARTNER_POOL,
            size: PARTNER_REPLICAS,
            path: partner,
            manifest: manifest_running(partner_manifest(), partner_args),
            app: AppSpec {
                digest: None,
                ..partner_app("")
            },
        }];
        for provider in &standalone {
            let (path, args) = provider_binary(
                provider.binary,
                provider.embedded_arg,
                args.providers_bin.as_deref(),
            )?;
            published.push(Published {
                pool: provider.name,
                size: 1,
                path,
                manifest: manifest_running(standalone_manifest(provider.binary)?, args),
                app: provider.app.clone(),
            });
        }
        let mut config = ZoneConfig::new(&data_dir);
        // A local platform obtains certificates from its emulated internet only.
        config.acme = acme.as_ref().map(|server| AcmeConfig {
            ca_pem: Some(server.ca_pem.clone()),
            interval: Duration::from_secs(2),
            // The emulated internet has no rate limits: a fixed name is tried again soon.
            retry_first: Duration::from_secs(10),
            ..AcmeConfig::new(&server.directory)
        });
        args.zone.configure(&mut config)?;
        // The emulators' inventory is complete and read every few seconds: a node missing
        // from it is gone, and its slot need not wait the minutes a real cloud's may.
        config.reconcile.lost_replace_after = UP_LOST_REPLACE_AFTER;
        config.apps = apps;
        config.agent_binary = std::env::current_exe().ok();
        if let Some(fabric) = &fabric {
            // Nodes reach the zone through the fabric's uplink, at the host's end of it; a
            // node whose agent does not join is replaced, as on a real cloud.
            config.grpc_addr = SocketAddr::from((fabric.host_address(), args.zone.grpc.port()));
            // They pull images from the API there too.
            config.node_http_addr = Some(SocketAddr::from((
                fabric.host_address(),
                args.zone.http.port(),
            )));
            config.reconcile.join_grace = Some(Duration::from_secs(600));
            config.mesh.reserved.push((
                "the emulated internet".to_string(),
                orc_emu::netns::PUBLIC_RANGE
                    .parse()
                    .expect("the emulated internet is a CIDR"),
            ));
        }
        let mut zone_config = config.clone();
        let zone = Zone::start(config)
            .await
            .with_context(|| format!("cannot start the zone in {}", data_dir.display()))?;
        zone_config.http_addr = zone.http_addr();
        zone_config.grpc_addr = zone.grpc_addr();
        if let (Some(edge), Some(addr)) = (zone_config.edge.as_mut(), zone.edge_addr()) {
            edge.addr = addr;
        }

        // From here on, as an operator would: through the zone's API with the admin token.
        let client = match zone_client(&zone) {
            Ok(client) => client,
            Err(error) => {
                zone.shutdown().await;
                return Err(error);
            }
        };
        // The partner's params name the zone's web URL (its access_keys_url).
        published[0].app = partner_app(zone.web_url());
        let mut pool = None;
        let mut pool_created = false;
        for app in &published {
            let done = async {
                report(&format!("publishing {}", app.app.package));
                if !app.publish(&client).await? {
                    report(&format!("keeping the pushed {}", app.app.package));
                }
                report(&format!("creating pool sys/sys/{}", app.pool));
                ensure_app_pool(&client, app).await
            }
            .await;
            match done {
                Ok((view, created)) if app.pool == PARTNER_POOL => {
                    pool_created = created;
                    pool = Some(view);
                }
                Ok(_) => {}
                Err(error) => {
                    zone.shutdown().await;
                    return Err(error);
                }
            }
        }
        let sys: Name = "sys".parse().expect("sys is a name");
        let pool = match pool {
            Some(view) => zone
                .store()
                .pool_by_path(&sys, &sys, &name(&view.name)?)
                .await
                .context("cannot read pool sys/sys/partner back")?,
            None => bail!("pool sys/sys/partner was not made"),
        };

        Ok(Up {
            zone,
            client,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            acme,
            data_dir,
            pool,
            pool_created,
            partner_running: 0,
            partner_registered: false,
            partner_priced: false,
            standalone: standalone.iter().map(|p| p.name).collect(),
        })
    }

    /// Waits up to `wait` for the partner's slots to run and its provider to register,
    /// reporting progress; what it saw shows in [`Up::summary`].
    pub async fn wait_for_partner(&mut self, wait: Duration, report: &dyn Fn(&str)) {
        let store = self.zone.store().clone();
        let deadline = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < deadline {
            self.partner_running = running_nodes(&store, &self.pool).await;
            self.partner_registered = store.provider_by_resource(PARTNER_RESOURCE).await.is_ok();
            report(&format!(
                "waiting for the partner ({}/{} slots running, {})",
                self.partner_running,
                self.pool.size,
                if self.partner_registered {
                    "registered"
                } else {
                    "not registered yet"
                }
            ));
            if self.partner_registered && !self.partner_priced {
                match widen_and_price_partner(&self.client).await {
                    Ok(()) => self.partner_priced = true,
                    Err(error) => {
                        tracing::warn!(error = %format!("{error:#}"), "cannot widen the partner or set its markup yet")
                    }
                }
            }
            if self.partner_running >= self.pool.size as usize
                && self.partner_registered
                && self.partner_priced
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the zone (its app slots with it) and starts it again on the same data dir and
    /// ports, as an operator restarts a zone: the emulators, their servers and the static
    /// hosts stay, the providers come back as the zone's app slots, and the nodes' agents
    /// dial again by themselves (`kill -HUP` on `orc up`).
    pub async fn restart_zone(self) -> anyhow::Result<Up> {
        let Up {
            zone,
            client: _,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            acme,
            data_dir: dir,
            pool,
            pool_created,
            partner_running,
            partner_registered,
            partner_priced,
            standalone,
        } = self;
        zone.shutdown().await;
        let zone = Zone::start(zone_config.clone())
            .await
            .with_context(|| format!("cannot start the zone in {}", dir.display()))?;
        let client = zone_client(&zone)?;
        Ok(Up {
            zone,
            client,
            zone_config,
            emulators,
            static_hosts,
            fabric,
            acme,
            data_dir: dir,
            pool,
            pool_created,
            partner_running,
            partner_registered,
            partner_priced,
            standalone,
        })
    }

    /// Stops the zone (its app slots first) and the emulators.
    pub async fn shutdown(self) {
        self.zone.shutdown().await;
        drop(self.emulators);
        if let Some(hosts) = self.static_hosts {
            tokio::task::spawn_blocking(move || drop(hosts)).await.ok();
        }
        if let Some(fabric) = self.fabric {
            // The emulators' tasks hold it too; they let go as their runtime winds down.
            tokio::task::spawn_blocking(move || drop(fabric)).await.ok();
        }
    }
}

pub(super) fn check_data_dir(dir: &Path) -> anyhow::Result<()> {
    // Created private (0700); one that other users can read is refused, naming the fix.
    orc_zone::zone::prepare_data_dir(dir)?;
    let probe = dir.join(".orc-up-probe");
    std::fs::write(&probe, b"")
        .with_context(|| format!("the data dir {} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub(super) fn check_port(what: &str, addr: SocketAddr) -> anyhow::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    TcpListener::bind(addr).map(drop).with_context(|| {
        format!(
            "{what} cannot listen on {addr}: the port is in use (another `orc up`?) or not \
             allowed; pick another with the matching --option of `orc up`"
        )
    })
}

pub(super) async fn running_nodes(store: &Store, pool: &Pool) -> usize {
    store
        .list_nodes_by_pool(&pool.id, false)
        .await
        .map(|nodes| {
            nodes
                .iter()
                .filter(|n| n.status.state == NodeState::Running)
                .count()
        })
        .unwrap_or(0)
}
