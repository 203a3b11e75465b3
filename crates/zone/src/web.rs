//! The zone's side of the web layer's seams (`orc-web`): [`StoreForEdge`], the store as the
//! access edge uses it, and [`ApiInProcess`], the API's router as the console calls it on a
//! person's behalf.

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use orc_web::console::ZoneApi;
use orc_web::store::{EdgeStore, StoreFailure, StoreResult};
use orc_zone_model::access::Caller;
use orc_zone_model::session::{
    SessionId, SessionPolicy, SessionSecret, SignedInWith, StoredAccessKey, WebSession,
};
use tower::Service as _;

use crate::api::extract::VouchedCaller;
use crate::model::{
    ApiToken, Membership, Name, Org, OrgId, Pool, Project, ProjectId, Timestamp, TokenId,
    TokenSecret, User, UserId,
};
use crate::store::{Store, StoreError};

/// The zone's store, as the access edge uses it.
#[derive(Debug, Clone)]
pub struct StoreForEdge(pub Store);

fn failure(e: StoreError) -> StoreFailure {
    StoreFailure(Box::new(e))
}

#[async_trait]
impl EdgeStore for StoreForEdge {
    async fn authenticate_token(
        &self,
        secret: &TokenSecret,
        now: Timestamp,
    ) -> StoreResult<Option<ApiToken>> {
        self.0
            .authenticate_token(secret, now)
            .await
            .map_err(failure)
    }

    async fn token(&self, id: &TokenId) -> StoreResult<ApiToken> {
        self.0.get_token(id).await.map_err(failure)
    }

    async fn user(&self, id: &UserId) -> StoreResult<User> {
        self.0.get_user(id).await.map_err(failure)
    }

    async fn user_with_password(&self, name: &Name) -> StoreResult<Option<(User, Option<String>)>> {
        self.0.user_with_password(name).await.map_err(failure)
    }

    async fn memberships_of(&self, user: &UserId) -> StoreResult<Vec<Membership>> {
        self.0.list_memberships_of_user(user).await.map_err(failure)
    }

    async fn create_web_session(
        &self,
        user: &UserId,
        signed_in_with: &SignedInWith,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<(WebSession, SessionSecret)> {
        self.0
            .create_web_session(user, signed_in_with, policy, now)
            .await
            .map_err(failure)
    }

    async fn web_session(
        &self,
        secret: &SessionSecret,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<Option<WebSession>> {
        self.0
            .web_session(secret, policy, now)
            .await
            .map_err(failure)
    }

    async fn touch_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()> {
        self.0.touch_web_session(id, now).await.map_err(failure)
    }

    async fn end_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()> {
        self.0.end_web_session(id, now).await.map_err(failure)
    }

    async fn delete_old_web_sessions(&self, before: Timestamp) -> StoreResult<u64> {
        self.0
            .delete_old_web_sessions(before)
            .await
            .map_err(failure)
    }

    async fn orgs(&self) -> StoreResult<Vec<Org>> {
        self.0.list_orgs().await.map_err(failure)
    }

    async fn org_by_name(&self, name: &Name) -> StoreResult<Option<Org>> {
        match self.0.org_by_name(name).await {
            Ok(org) => Ok(Some(org)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(failure(e)),
        }
    }

    async fn projects(&self, org: &OrgId) -> StoreResult<Vec<Project>> {
        self.0.list_projects(org).await.map_err(failure)
    }

    async fn pools(&self, project: &ProjectId) -> StoreResult<Vec<Pool>> {
        self.0.list_pools(project).await.map_err(failure)
    }

    async fn access_keys(&self, now: Timestamp) -> StoreResult<Vec<StoredAccessKey>> {
        self.0.access_keys(now).await.map_err(failure)
    }

    async fn add_access_key(
        &self,
        kid: &str,
        pkcs8: &[u8],
        now: Timestamp,
        retire_others_at: Timestamp,
    ) -> StoreResult<()> {
        self.0
            .add_access_key(kid, pkcs8, now, retire_others_at)
            .await
            .map_err(failure)
    }
}

/// The API's router, answering the console in process for a caller it vouches for.
#[derive(Clone)]
pub struct ApiInProcess(pub axum::Router);

impl std::fmt::Debug for ApiInProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiInProcess").finish_non_exhaustive()
    }
}

#[async_trait]
impl ZoneApi for ApiInProcess {
    async fn call(&self, caller: &Caller, mut request: Request<Body>) -> Response {
        request
            .extensions_mut()
            .insert(VouchedCaller(caller.clone()));
        let mut router = self.0.clone();
        match router.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}
