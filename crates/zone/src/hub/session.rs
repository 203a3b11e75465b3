//! One provider stream from `Attach` to its end: authenticate, read the hello, register
//! the replica in its group, then route what the provider sends until the stream ends or
//! falls silent; on the way out, promote a standby if this replica was serving.

use orc_proto::pb::provider_hub_server::ProviderHub;
use orc_proto::{
    Hello, ProviderBody, ProviderMessage, ReplicaRole, RequestId, ZoneBody, check_protocol_version,
    pb,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};

use super::auth::{Admitted, authenticate};
use super::{Attached, Group, Hub, Outbound, send};
use crate::backend::BackendError;
use crate::model::{
    EventScope, Name, NewProvider, PricingStrategy, Project, Provider, ProviderScope,
};
use crate::streams::{Ending, Next, StreamLoop, first_message};

/// Why a catalog that declares site gateways is refused from a provider outside org `sys`.
const CATALOG_REFUSED_GATEWAYS: &str = "it declares site gateways, which only a zone-scoped \
     provider of the zone's operator (org sys) may run; nothing is offered or created from it";
use crate::store::StoreError;

/// The tonic service behind [`Hub::grpc_service`].
pub struct HubService {
    pub(super) hub: Hub,
}

impl std::fmt::Debug for HubService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubService")
    }
}

type Inbound = crate::streams::Inbound<pb::ProviderMessage>;

#[tonic::async_trait]
impl ProviderHub for HubService {
    type AttachStream = UnboundedReceiverStream<Result<pb::ZoneMessage, Status>>;

    async fn attach(
        &self,
        request: Request<Streaming<pb::ProviderMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let hub = self.hub.clone();
        let admitted = authenticate(&hub.inner.store, request.metadata(), hub.now()).await?;
        if let Some(connection) = request.extensions().get::<orc_tls::ConnectionAuth>() {
            connection.mark_authenticated();
        }
        // Kept to check the credential again while the stream lives.
        let credentials = request.metadata().clone();
        let inbound: Inbound = Box::pin(request.into_inner());
        let (outbound, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            hub.run_session(admitted, credentials, inbound, outbound)
                .await
        });
        Ok(Response::new(UnboundedReceiverStream::new(rx)))
    }
}

impl Hub {
    async fn run_session(
        &self,
        admitted: Admitted,
        credentials: MetadataMap,
        mut inbound: Inbound,
        outbound: Outbound,
    ) {
        let project = &admitted.project;
        let hello = match self.read_hello(&mut inbound).await {
            Ok(hello) => hello,
            Err(status) => {
                let _ = outbound.send(Err(status));
                return;
            }
        };
        let provider = match self
            .register_provider(project, &admitted.principal, &hello)
            .await
        {
            Ok(p) => p,
            Err(status) => {
                let _ = outbound.send(Err(status));
                return;
            }
        };
        let stream = self
            .inner
            .next_stream
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let role = self.attach_replica(
            &provider,
            &admitted.principal,
            hello.clone(),
            stream,
            outbound.clone(),
        );
        tracing::info!(
            provider = %provider.name,
            resource = %provider.resource_uri,
            host = %hello.replica.host,
            pid = hello.replica.pid,
            slot = hello.replica.slot,
            %role,
            "provider replica attached"
        );
        let options = &self.inner.options;
        let mut stream_loop = StreamLoop::new(
            inbound,
            outbound,
            self.inner.closing.subscribe(),
            options.reauth_interval,
            options.keepalive_timeout,
        );
        let end = self
            .route_messages(&provider, stream, &credentials, &mut stream_loop)
            .await;
        tracing::info!(
            provider = %provider.name,
            host = %hello.replica.host,
            pid = hello.replica.pid,
            reason = end,
            "provider replica detached"
        );
        self.detach_replica(&provider.resource_uri, stream);
    }

    async fn read_hello(&self, inbound: &mut Inbound) -> Result<Hello, Status> {
        let message = first_message(inbound, self.inner.options.hello_timeout).await?;
        let message = ProviderMessage::try_from(message)
            .map_err(|e| Status::invalid_argument(format!("the first message is invalid: {e}")))?;
        match message.body {
            ProviderBody::Hello(hello) => {
                check_protocol_version(hello.protocol_version)
                    .map_err(|e| Status::failed_precondition(e.to_string()))?;
                Ok(hello)
            }
            other => Err(Status::invalid_argument(format!(
                "the first message must be hello, not {}",
                super::body_name(&other)
            ))),
        }
    }

    /// The provider row of the hello's resource URI, created in `project` if absent; only
    /// the principal that registered a resource may attach replicas of it, and an app pool's
    /// principal only those of the first resource it registered (checked before anything is
    /// created, and again as it claims the row).
    async fn register_provider(
        &self,
        project: &Project,
        principal: &str,
        hello: &Hello,
    ) -> Result<Provider, Status> {
        let store = &self.inner.store;
        let uri = hello.resource_uri.as_str();
        let name: Name = hello.provider.as_str().parse().map_err(|e| {
            Status::invalid_argument(format!("hello.provider is not a valid name: {e}"))
        })?;
        let unavailable = |e: StoreError| {
            tracing::warn!(error = %e, resource = uri, "store error while registering a provider");
            Status::unavailable("the zone's store is not available")
        };
        let sole = super::auth::serves_one_resource(principal);
        let only_its_own = |own: &str| {
            Status::permission_denied(format!(
                "an app pool's service credential serves the one resource its pool registered \
                 first ({}); it cannot register or attach as {}",
                orc_common::text::quoted(own),
                orc_common::text::quoted(uri)
            ))
        };
        if sole
            && let Some(own) = store
                .first_provider_served_by(principal)
                .await
                .map_err(unavailable)?
            && own.resource_uri != uri
        {
            tracing::warn!(principal, resource = uri, serves = %own.resource_uri, "a service credential tried to register a second resource");
            return Err(only_its_own(&own.resource_uri));
        }
        let found = match store.provider_by_resource(uri).await {
            Ok(p) => Some(p),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(unavailable(e)),
        };
        let provider = match found {
            Some(p) => p,
            None => {
                let new = NewProvider {
                    project_id: project.id.clone(),
                    name,
                    resource_uri: uri.to_string(),
                    scope: ProviderScope::Project,
                    pricing: PricingStrategy::None,
                };
                match store.create_provider(&new, self.now()).await {
                    Ok(p) => p,
                    // Another replica of the resource may have registered it meanwhile.
                    Err(create_error) => match store.provider_by_resource(uri).await {
                        Ok(p) => p,
                        Err(_) => {
                            return Err(Status::invalid_argument(format!(
                                "provider {} cannot be registered: {create_error}",
                                hello.provider
                            )));
                        }
                    },
                }
            }
        };
        if provider.project_id != project.id {
            return Err(Status::permission_denied(format!(
                "resource {uri} belongs to another project"
            )));
        }
        let claimed = if sole {
            store.claim_sole_provider(&provider.id, principal).await
        } else {
            store.claim_provider(&provider.id, principal).await
        }
        .map_err(unavailable)?;
        if !claimed {
            if sole
                && let Some(own) = store
                    .first_provider_served_by(principal)
                    .await
                    .map_err(unavailable)?
                && own.id != provider.id
            {
                return Err(only_its_own(&own.resource_uri));
            }
            return Err(Status::permission_denied(format!(
                "resource {uri} is served with another credential; only its own may attach replicas"
            )));
        }
        Ok(provider)
    }

    /// Adds the replica to its group and welcomes it; a serving replica gets the group's
    /// requests in flight.
    fn attach_replica(
        &self,
        provider: &Provider,
        principal: &str,
        hello: Hello,
        stream: u64,
        outbound: Outbound,
    ) -> ReplicaRole {
        let now = self.now();
        let mut state = self.state();
        let group = state
            .groups
            .entry(provider.resource_uri.clone())
            .or_insert_with(|| Group {
                provider: provider.clone(),
                replicas: Vec::new(),
                catalog: None,
                config_changed_at: now,
                in_flight: Default::default(),
                catalog_refused: false,
            });
        group.provider = provider.clone();
        group.config_changed_at = now;
        let role = if group.serving().is_some() {
            ReplicaRole::Standby
        } else {
            ReplicaRole::Serving
        };
        send(
            &outbound,
            RequestId::UNSOLICITED,
            ZoneBody::Welcome { role },
        );
        group.replicas.push(Attached {
            stream,
            principal: principal.to_string(),
            hello,
            since: now,
            role,
            outbound,
        });
        if role == ReplicaRole::Serving {
            group.resend_in_flight();
        }
        role
    }

    /// Removes the replica; if it served, promotes the oldest standby and re-sends the
    /// group's requests in flight to it.
    fn detach_replica(&self, resource_uri: &str, stream: u64) {
        let mut state = self.state();
        let Some(group) = state.groups.get_mut(resource_uri) else {
            return;
        };
        let Some(index) = group.replicas.iter().position(|r| r.stream == stream) else {
            return;
        };
        let gone = group.replicas.remove(index);
        if gone.role != ReplicaRole::Serving {
            return;
        }
        if let Some(next) = group.replicas.first_mut() {
            next.role = ReplicaRole::Serving;
            send(
                &next.outbound,
                RequestId::UNSOLICITED,
                ZoneBody::RoleChange {
                    role: ReplicaRole::Serving,
                },
            );
            tracing::info!(
                provider = %group.provider.name,
                host = %next.hello.replica.host,
                pid = next.hello.replica.pid,
                in_flight = group.in_flight.len(),
                "standby promoted to serving"
            );
            group.resend_in_flight();
        }
    }

    /// Handles the stream's messages until it ends or falls silent; returns why it ended.
    /// Routes what the provider sends until its stream ends; answers why it ended. A
    /// revoked or expired credential, or a role taken away, ends the stream at the next
    /// tick, when the credential is checked again.
    async fn route_messages(
        &self,
        provider: &Provider,
        stream: u64,
        credentials: &MetadataMap,
        stream_loop: &mut StreamLoop<pb::ProviderMessage, pb::ZoneMessage>,
    ) -> &'static str {
        // Progress notes are recorded one after another, in the order the stream sent them,
        // by a task of this stream's own; it ends with the stream.
        let (notes, queued) = mpsc::channel(PROGRESS_QUEUE);
        tokio::spawn(record_progress(
            self.inner.store.clone(),
            provider.id.clone(),
            queued,
        ));
        loop {
            let raw = match stream_loop.next(std::future::pending::<()>()).await {
                Next::Message(raw) => raw,
                Next::Own(()) => continue,
                Next::Tick => {
                    match authenticate(&self.inner.store, credentials, self.now()).await {
                        Ok(_) => continue,
                        Err(status) if status.code() == tonic::Code::Unavailable => continue,
                        Err(status) => {
                            let _ =
                                stream_loop
                                    .outbound()
                                    .send(Err(Status::unauthenticated(format!(
                                        "the stream's credential no longer admits it: {}",
                                        status.message()
                                    ))));
                            return "its credential was revoked, expired or lost its role";
                        }
                    }
                }
                Next::End(ending) => {
                    return match ending {
                        Ending::Closing => "the zone is shutting down",
                        Ending::Disconnected => "the zone closed the stream",
                        Ending::Silent => "silent past the keep-alive timeout",
                        Ending::PeerClosed => "the provider closed the stream",
                        Ending::Broke(_) => "the stream failed",
                    };
                }
            };
            let outbound = stream_loop.outbound();
            let request_id = RequestId(raw.request_id);
            match ProviderMessage::try_from(raw) {
                Ok(message) => self.handle_message(provider, stream, message, outbound, &notes),
                Err(e) => {
                    tracing::warn!(provider = %provider.name, error = %e, "invalid provider message");
                    if request_id != RequestId::UNSOLICITED {
                        self.finish_request(
                            provider,
                            stream,
                            request_id,
                            Err(BackendError::Protocol {
                                provider: provider.name.to_string(),
                                detail: e.to_string(),
                            }),
                        );
                    }
                }
            }
        }
    }

    fn handle_message(
        &self,
        provider: &Provider,
        stream: u64,
        message: ProviderMessage,
        outbound: &Outbound,
        notes: &mpsc::Sender<ProgressNote>,
    ) {
        let ProviderMessage { request_id, body } = message;
        match body {
            ProviderBody::KeepAlive => send(outbound, RequestId::UNSOLICITED, ZoneBody::KeepAlive),
            ProviderBody::Catalog(catalog) if catalog.site_gateways && !provider.is_operators() => {
                self.refuse_catalog(provider, CATALOG_REFUSED_GATEWAYS);
            }
            ProviderBody::Catalog(catalog) => {
                let now = self.now();
                let mut state = self.state();
                if let Some(group) = state.groups.get_mut(&provider.resource_uri) {
                    group.catalog_refused = false;
                    let changed = group
                        .catalog
                        .as_ref()
                        .is_none_or(|(previous, _)| *previous != catalog);
                    if changed {
                        group.config_changed_at = now;
                    }
                    group.catalog = Some((catalog, now));
                }
            }
            ProviderBody::Hello(_) => {
                tracing::warn!(provider = %provider.name, "a second hello on one stream is ignored");
            }
            ProviderBody::DeployProgress(progress) => {
                // Stored and shown to tenants: one line, at most 1 KiB, nothing that acts on
                // a terminal or reorders what a reader sees.
                let words = orc_common::text::clean_line(&progress.words, PROGRESS_MAX_BYTES);
                tracing::debug!(
                    provider = %provider.name,
                    node = %progress.node_id,
                    words = %words,
                    "deploy progress"
                );
                let product_uuid = progress.product_uuid.and_then(|u| {
                    match uuid::Uuid::try_parse(&u) {
                        // Lowercase and hyphenated, as Linux shows it and agents report it.
                        Ok(uuid) => Some(uuid.hyphenated().to_string()),
                        Err(_) => {
                            tracing::warn!(provider = %provider.name, node = %progress.node_id, "a deploy progress names no usable product UUID; ignored");
                            None
                        }
                    }
                });
                let note = ProgressNote {
                    node_id: progress.node_id,
                    words,
                    product_uuid,
                    at: self.now(),
                };
                if notes.try_send(note).is_err() {
                    tracing::warn!(
                        provider = %provider.name,
                        "deploy progress dropped: {PROGRESS_QUEUE} notes are waiting already"
                    );
                }
            }
            ProviderBody::Inventory(inventory) => {
                let serving = self
                    .state()
                    .groups
                    .get(&provider.resource_uri)
                    .and_then(|g| g.serving().map(|s| s.stream))
                    == Some(stream);
                if !serving {
                    tracing::warn!(provider = %provider.name, "inventory from a standby is ignored");
                    return;
                }
                let store = self.inner.store.clone();
                let provider = provider.clone();
                let now = self.now();
                let grace = self.inner.options.lost_grace;
                let mesh = self.inner.options.mesh.clone();
                tokio::spawn(async move {
                    match crate::reconcile::apply_inventory(
                        &store, &provider, &inventory, now, grace,
                    )
                    .await
                    {
                        Ok(applied) => {
                            if applied.mesh_changed
                                && let Some(mesh) = mesh
                            {
                                mesh.changed(crate::mesh::MeshChange::Everything);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(provider = %provider.name, error = %e, "inventory not applied");
                        }
                    }
                });
            }
            body @ (ProviderBody::QuoteReply { .. }
            | ProviderBody::DeployDone(_)
            | ProviderBody::DeployRefused { .. }
            | ProviderBody::DestroyDone { .. }
            | ProviderBody::DestroyRefused { .. }) => {
                self.finish_request(provider, stream, request_id, Ok(body));
            }
        }
    }

    /// Keeps the provider's catalog out of the zone (so nothing is offered, quoted or created
    /// from it) and, the first time, says why in a warning and a `provider.catalog_refused`
    /// event in the provider's project.
    fn refuse_catalog(&self, provider: &Provider, why: &str) {
        let first = self
            .state()
            .groups
            .get_mut(&provider.resource_uri)
            .is_some_and(|group| !std::mem::replace(&mut group.catalog_refused, true));
        if !first {
            return;
        }
        tracing::warn!(provider = %provider.name, id = %provider.id, "a catalog is refused: {why}");
        let store = self.inner.store.clone();
        let scope = EventScope::of_provider(provider);
        let words = format!(
            "The catalog of provider {} is refused: {why}.",
            provider.name
        );
        let now = self.now();
        tokio::spawn(async move {
            if let Err(e) = store
                .record_event(&scope, "provider.catalog_refused", &words, now)
                .await
            {
                tracing::warn!(error = %e, "a refused catalog's event was not recorded");
            }
        });
    }

    /// Hands the final answer to the waiting request, if it came on the stream the request
    /// was sent on. An answer nobody waits for (already answered, or timed out) is dropped;
    /// so is one from another replica of the group, which must not set a node's price or
    /// report its deploy.
    fn finish_request(
        &self,
        provider: &Provider,
        stream: u64,
        request_id: RequestId,
        answer: Result<ProviderBody, BackendError>,
    ) {
        let mut state = self.state();
        let Some(group) = state.groups.get_mut(&provider.resource_uri) else {
            return;
        };
        match group.in_flight.get(&request_id.0) {
            Some(in_flight) if in_flight.sent_to == stream => {
                if let Some(in_flight) = group.in_flight.remove(&request_id.0) {
                    let _ = in_flight.reply.send(answer);
                }
            }
            Some(_) => tracing::warn!(
                provider = %provider.name,
                %request_id,
                "an answer from a replica the request was not sent to was dropped"
            ),
            None => tracing::debug!(
                provider = %provider.name,
                %request_id,
                "answer for a request no longer waiting"
            ),
        }
    }
}

/// The longest deploy progress note the hub stores, in bytes.
pub const PROGRESS_MAX_BYTES: usize = 1024;
/// How many notes of one stream may wait to be recorded; a flood beyond it is dropped.
const PROGRESS_QUEUE: usize = 256;

/// A deploy progress note, cleaned, waiting to be recorded.
pub(super) struct ProgressNote {
    node_id: crate::model::NodeId,
    words: String,
    /// The machine the provider identified; the node's live join tokens get bound to it.
    product_uuid: Option<String>,
    at: crate::model::Timestamp,
}

/// Records the notes of one stream in order, each in its node's pool and project, where
/// tenants read events; a note about a node that is gone, or not the provider's, is dropped.
async fn record_progress(
    store: crate::store::Store,
    provider_id: crate::model::ProviderId,
    mut queued: mpsc::Receiver<ProgressNote>,
) {
    while let Some(note) = queued.recv().await {
        let scope = match progress_scope(&store, provider_id.clone(), note.node_id.clone()).await {
            Ok(scope) => scope,
            Err(why) => {
                tracing::warn!(node = %note.node_id, "deploy progress dropped: {why}");
                continue;
            }
        };
        if let Some(uuid) = &note.product_uuid {
            match store.bind_join_tokens(&note.node_id, uuid).await {
                Ok(bound) => {
                    tracing::info!(node = %note.node_id, bound, "join tokens bound to the machine the provider identified");
                }
                Err(e) => tracing::warn!(node = %note.node_id, error = %e, "join tokens not bound"),
            }
        }
        if let Err(e) = store
            .record_event(&scope, "node.progress", &note.words, note.at)
            .await
        {
            tracing::warn!(error = %e, "deploy progress not recorded");
        }
    }
}

/// Where a deploy progress note of `node_id` is shown: its org, project, pool and node. Only
/// the provider of the node's pool may write there; a note about any other node says why it
/// is dropped.
async fn progress_scope(
    store: &crate::store::Store,
    provider_id: crate::model::ProviderId,
    node_id: crate::model::NodeId,
) -> Result<EventScope, String> {
    let node = store.get_node(&node_id).await.map_err(|e| e.to_string())?;
    let pool = store
        .get_pool(&node.pool_id)
        .await
        .map_err(|e| e.to_string())?;
    if pool.spec.provider_id != provider_id {
        return Err(format!(
            "node {node_id} belongs to a pool of another provider ({})",
            pool.spec.provider_id
        ));
    }
    let project = store
        .get_project(&pool.project_id)
        .await
        .map_err(|e| e.to_string())?;
    Ok(EventScope {
        org_id: Some(project.org_id),
        project_id: Some(pool.project_id),
        provider_id: Some(provider_id),
        pool_id: Some(pool.id),
        node_id: Some(node_id),
    })
}
