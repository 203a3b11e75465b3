//! Certificates for the domains apps route, obtained by ACME and renewed before they end.
//!
//! Every pass the zone looks at which domains the apps of each project route while the
//! project has an ingress node (each domain belongs to the first app in the zone that
//! claims it; later ones are blocked), records them as wanted, and orders a certificate for
//! each one that is due: new, a third of its lifetime from its end, or past the backoff of
//! a failure. A challenge is answered by every ingress node of the project: the zone keeps
//! it in the store, tells the nodes' sessions, and waits until the attached ones say they
//! hold it before the directory is asked to check. A failure is kept on the domain in
//! words (`orc app status` shows it) and tried again after 2, 4, 8 … minutes, at most
//! every 6 hours; a certificate issued before is served until it ends. A domain no app
//! routed for a day is forgotten with its key.

pub mod client;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use orc_app_model::revision::DeploymentState;
use orc_common::time::SharedClock;
use orc_zone_model::{EventScope, ProjectId, Timestamp};
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use crate::agents::{AgentHub, AssignmentSignal};
use crate::store::{AcmeChallenge, CertificateRow, Store};
use client::{Answer, Directory, Http01};

/// Let's Encrypt's production directory, the default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// Where and how the zone obtains certificates.
#[derive(Debug, Clone)]
pub struct AcmeConfig {
    /// The ACME directory URL.
    pub directory: String,
    /// An e-mail address for the account (the directory's expiry notices).
    pub contact: Option<String>,
    /// CA certificates (PEM) the directory's HTTPS is checked against besides the web's,
    /// for a private ACME server.
    pub ca_pem: Option<String>,
    /// How often the zone looks for due domains when nothing wakes it.
    pub interval: Duration,
    /// The wait after a first failure, doubled with each further one (at most 6 hours).
    /// Two minutes keeps within Let's Encrypt's limit of five failed validations per
    /// domain an hour.
    pub retry_first: Duration,
}

impl AcmeConfig {
    /// Let's Encrypt, no contact.
    pub fn lets_encrypt() -> AcmeConfig {
        AcmeConfig::new(LETS_ENCRYPT)
    }

    /// The directory at `url`, trusted by the web's roots.
    pub fn new(url: &str) -> AcmeConfig {
        AcmeConfig {
            directory: url.to_string(),
            contact: None,
            ca_pem: None,
            interval: Duration::from_secs(10),
            retry_first: Duration::from_secs(120),
        }
    }
}

/// How long a challenge is answered at most.
const CHALLENGE_LIFETIME_MS: i64 = 10 * 60_000;
/// How long the zone waits for attached ingress nodes to hold a challenge.
const PUBLISH_WAIT: Duration = Duration::from_secs(20);
/// The longest wait between attempts.
const RETRY_MAX_MS: i64 = 6 * 3_600_000;
/// How long a domain no app routes keeps its certificate.
const FORGET_AFTER_MS: i64 = 24 * 3_600_000;
/// How often a domain still routed is marked wanted again (well within [`FORGET_AFTER_MS`]).
const WANTED_REFRESH_MS: i64 = 3_600_000;
/// The least time between two passes: assignments change with every replica's readiness.
const PASS_GAP: Duration = Duration::from_secs(1);
/// How many domains are ordered at once.
const AT_ONCE: usize = 4;

/// When to try again after `attempts` failures in a row (the one just made included), the
/// first after `first`.
pub fn retry_after_ms(attempts: u32, first: Duration) -> i64 {
    let first = i64::try_from(first.as_millis()).unwrap_or(RETRY_MAX_MS);
    let doublings = attempts.saturating_sub(1).min(16);
    first.saturating_mul(1 << doublings).min(RETRY_MAX_MS)
}

/// When a certificate valid from `not_before` to `not_after` is renewed: with a third of
/// its lifetime left (30 days of Let's Encrypt's 90).
pub fn renew_at(not_before: Timestamp, not_after: Timestamp) -> Timestamp {
    let lifetime = (not_after.millis() - not_before.millis()).max(0);
    Timestamp(not_after.millis() - lifetime / 3)
}

/// The certificates' controller.
pub struct Certificates {
    store: Store,
    clock: SharedClock,
    directory: Directory,
    agents: AgentHub,
    assignments: AssignmentSignal,
    interval: Duration,
    retry_first: Duration,
    account: Mutex<Option<instant_acme::Account>>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("directory", &self.directory)
            .finish_non_exhaustive()
    }
}

impl Certificates {
    /// A controller ordering from `directory` with the timings of `config` (its
    /// directory, contact and roots are `directory`'s); it tells nodes' sessions when their
    /// challenges or certificates changed.
    pub fn new(
        store: Store,
        clock: SharedClock,
        directory: Directory,
        config: &AcmeConfig,
        agents: AgentHub,
    ) -> Certificates {
        let assignments = agents.assignment_signal();
        Certificates {
            store,
            clock,
            directory,
            agents,
            assignments,
            interval: config.interval,
            retry_first: config.retry_first,
            account: Mutex::new(None),
        }
    }

    /// Runs passes until `stopped`.
    pub fn spawn(self, mut stopped: watch::Receiver<bool>) -> JoinHandle<()> {
        let this = Arc::new(self);
        // Whatever changes nodes' assignments (a deploy, a replica turning ready, a node
        // taking ingress) may change what is wanted.
        let mut assignments = this.assignments.subscribe();
        tokio::spawn(async move {
            tracing::info!(directory = %this.directory.url, "certificates for apps' domains come from ACME");
            loop {
                if *stopped.borrow() {
                    break;
                }
                if let Err(error) = this.pass().await {
                    tracing::warn!(%error, "certificate pass failed");
                }
                tokio::select! {
                    () = tokio::time::sleep(PASS_GAP) => {}
                    _ = stopped.changed() => {}
                }
                tokio::select! {
                    _ = assignments.changed() => {}
                    _ = tokio::time::sleep(this.interval) => {}
                    _ = stopped.changed() => {}
                }
            }
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// One pass: records what is wanted, orders what is due.
    pub async fn pass(&self) -> Result<(), String> {
        let now = self.now();
        let wanted = wanted_domains(&self.store)
            .await
            .map_err(|e| e.to_string())?;
        let mut known: BTreeMap<String, CertificateRow> = self
            .store
            .certificates()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|row| (row.domain.clone(), row))
            .collect();
        let mut due = Vec::new();
        for (domain, project) in &wanted {
            // A row of the same project marked wanted within the hour needs no write.
            let fresh = known.remove(domain).filter(|row| {
                &row.project == project && row.wanted_at.millis() > now.millis() - WANTED_REFRESH_MS
            });
            let row = match fresh {
                Some(row) => row,
                None => self
                    .store
                    .want_certificate(domain, project, now)
                    .await
                    .map_err(|e| e.to_string())?,
            };
            if row.next_attempt_at <= now {
                due.push(row);
            }
        }
        let forgotten = self
            .store
            .forget_certificates(Timestamp(now.millis() - FORGET_AFTER_MS))
            .await
            .map_err(|e| e.to_string())?;
        if !forgotten.is_empty() {
            tracing::info!(domains = ?forgotten, "certificates of domains no app routes any more were removed");
        }
        if self
            .store
            .expire_acme_challenges(now)
            .await
            .map_err(|e| e.to_string())?
            > 0
        {
            self.assignments.changed();
        }
        if due.is_empty() {
            return Ok(());
        }
        let account = self.account().await?;
        let mut orders = tokio::task::JoinSet::new();
        let mut queue = due.into_iter();
        let this = self;
        loop {
            while orders.len() < AT_ONCE {
                let Some(row) = queue.next() else { break };
                let account = account.clone();
                let answer = NodeAnswer {
                    store: this.store.clone(),
                    agents: this.agents.clone(),
                    assignments: this.assignments.clone(),
                    project: row.project.clone(),
                    domain: row.domain.clone(),
                    now: self.now(),
                };
                orders.spawn(async move {
                    let outcome = client::obtain(&account, &row.domain, &answer).await;
                    (row, outcome)
                });
            }
            let Some(done) = orders.join_next().await else {
                break;
            };
            let Ok((row, outcome)) = done else { continue };
            self.record(&row, outcome).await;
        }
        Ok(())
    }

    /// Keeps what an order came to, tells the nodes, and says so in the project's events.
    async fn record(&self, row: &CertificateRow, outcome: Result<client::Issued, String>) {
        let now = self.now();
        let domain = &row.domain;
        match outcome {
            Ok(issued) => {
                let not_before = Timestamp(issued.not_before_ms);
                let not_after = Timestamp(issued.not_after_ms);
                let kept = self
                    .store
                    .record_certificate_issued(
                        domain,
                        &row.project,
                        &issued.chain_pem,
                        &issued.key_pem,
                        not_after,
                        renew_at(not_before, not_after),
                        now,
                    )
                    .await;
                match kept {
                    Ok(true) => {
                        tracing::info!(%domain, until = %not_after, "certificate issued");
                        self.assignments.changed();
                        let until = chrono::DateTime::from_timestamp_millis(not_after.millis())
                            .map(|t| t.format("%Y-%m-%d").to_string())
                            .unwrap_or_default();
                        self.event(
                            &row.project,
                            "app.certificate_issued",
                            &format!("a certificate for {domain} was issued, valid until {until}"),
                        )
                        .await;
                    }
                    Ok(false) => {
                        tracing::info!(%domain, "a certificate came for a domain that moved to another project; not kept");
                    }
                    Err(error) => {
                        tracing::warn!(%domain, %error, "an issued certificate was not kept")
                    }
                }
            }
            Err(reason) => {
                let attempts = row.attempts + 1;
                let retry = Timestamp(now.millis() + retry_after_ms(attempts, self.retry_first));
                tracing::warn!(%domain, %reason, attempts, retry = %retry, "no certificate");
                if let Err(error) = self
                    .store
                    .record_certificate_failed(domain, &row.project, &reason, retry, now)
                    .await
                {
                    tracing::warn!(%domain, %error, "a failed order was not recorded");
                }
                self.event(
                    &row.project,
                    "app.certificate_failed",
                    &format!("no certificate for {domain}: {reason}"),
                )
                .await;
            }
        }
    }

    async fn event(&self, project: &ProjectId, kind: &str, words: &str) {
        let org = match self.store.get_project(project).await {
            Ok(project) => project.org_id,
            Err(error) => {
                tracing::warn!(%error, kind, "certificate event not recorded");
                return;
            }
        };
        let scope = EventScope {
            org_id: Some(org),
            project_id: Some(project.clone()),
            ..Default::default()
        };
        if let Err(error) = self
            .store
            .record_event(&scope, kind, words, self.now())
            .await
        {
            tracing::warn!(%error, kind, "certificate event not recorded");
        }
    }

    /// The zone's account at the directory: the stored one, or a new one kept for good.
    async fn account(&self) -> Result<instant_acme::Account, String> {
        let mut held = self.account.lock().await;
        if let Some(account) = held.as_ref() {
            return Ok(account.clone());
        }
        let url = &self.directory.url;
        let stored = self
            .store
            .acme_account(url)
            .await
            .map_err(|e| e.to_string())?;
        let account = match stored {
            Some(credentials) => self.directory.account(&credentials).await?,
            None => {
                let (account, credentials) = self.directory.create_account().await?;
                let kept = self
                    .store
                    .keep_acme_account(url, &credentials, self.now())
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(directory = %url, "the zone's ACME account was created");
                if *kept == credentials {
                    account
                } else {
                    // Another controller kept its account first: use that one.
                    self.directory.account(&kept).await?
                }
            }
        };
        *held = Some(account.clone());
        Ok(account)
    }
}

/// The domains each project's apps route while the project has an ingress node: what the
/// newest revision of every app that is not blocked declares.
pub async fn wanted_domains(
    store: &Store,
) -> Result<BTreeMap<String, ProjectId>, crate::store::StoreError> {
    let projects: BTreeSet<ProjectId> = store
        .all_apps()
        .await?
        .into_iter()
        .map(|(project, _)| project)
        .collect();
    let mut wanted = BTreeMap::new();
    for project in projects {
        let apps = store.list_apps(&project).await?;
        let domains: Vec<String> = apps
            .iter()
            .filter(|row| row.state != DeploymentState::Blocked.as_str())
            .filter_map(|row| crate::rollouts::document(row).ok())
            .flat_map(|document| {
                document
                    .spec
                    .services
                    .values()
                    .flat_map(|service| service.domains().to_vec())
                    .collect::<Vec<_>>()
            })
            .collect();
        if domains.is_empty() || store.ingress_nodes(&project).await?.is_empty() {
            continue;
        }
        for domain in domains {
            wanted.entry(domain).or_insert_with(|| project.clone());
        }
    }
    Ok(wanted)
}

/// Answers a domain's challenges from every ingress node of its project.
struct NodeAnswer {
    store: Store,
    agents: AgentHub,
    assignments: AssignmentSignal,
    project: ProjectId,
    domain: String,
    now: Timestamp,
}

impl Answer for NodeAnswer {
    async fn publish(&self, challenges: &[Http01]) -> Result<(), String> {
        let expires = self.now.plus_millis(CHALLENGE_LIFETIME_MS);
        for challenge in challenges {
            let row = AcmeChallenge {
                token: challenge.token.clone(),
                domain: self.domain.clone(),
                key_authorization: challenge.key_authorization.clone(),
            };
            self.store
                .put_acme_challenge(&row, &self.project, expires)
                .await
                .map_err(|e| format!("the challenge cannot be kept: {e}"))?;
        }
        self.assignments.changed();
        let nodes = self
            .store
            .ingress_nodes(&self.project)
            .await
            .map_err(|e| e.to_string())?;
        let tokens: BTreeSet<String> = challenges.iter().map(|c| c.token.clone()).collect();
        let late = self
            .agents
            .wait_for_challenges(&nodes, &tokens, PUBLISH_WAIT)
            .await;
        if !late.is_empty() {
            tracing::warn!(domain = %self.domain, nodes = ?late, "ingress nodes did not confirm the challenge in time; asking the directory anyway");
        }
        Ok(())
    }

    async fn withdraw(&self, challenges: &[Http01]) {
        for challenge in challenges {
            if let Err(error) = self.store.delete_acme_challenge(&challenge.token).await {
                tracing::warn!(%error, "a challenge was not removed; it ends by itself");
            }
        }
        self.assignments.changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_the_first_wait_up_to_six_hours() {
        let first = Duration::from_secs(120);
        let minutes: Vec<i64> = (1..=9).map(|a| retry_after_ms(a, first) / 60_000).collect();
        assert_eq!(minutes, [2, 4, 8, 16, 32, 64, 128, 256, 360]);
        assert_eq!(retry_after_ms(u32::MAX, first), RETRY_MAX_MS);
        assert_eq!(retry_after_ms(3, Duration::from_secs(10)), 40_000);
    }

    #[test]
    fn renewal_comes_with_a_third_of_the_lifetime_left() {
        let day = 86_400_000;
        let start = Timestamp(1_000 * day);
        assert_eq!(
            renew_at(start, start.plus_millis(90 * day)),
            start.plus_millis(60 * day)
        );
        // A six-day certificate renews after four days.
        assert_eq!(
            renew_at(start, start.plus_millis(6 * day)),
            start.plus_millis(4 * day)
        );
    }
}
