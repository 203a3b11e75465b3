//! What the access edge keeps in the zone's store (sessions, and who a credential belongs
//! to, which orgs hold which pools, the signing keys), as the operations the edge needs.
//! The zone implements [`EdgeStore`] over its store; every controller of a zone shares it,
//! so each of them honours every session.

use async_trait::async_trait;
use orc_zone_model::session::{
    SessionId, SessionPolicy, SessionSecret, SignedInWith, StoredAccessKey, WebSession,
};
use orc_zone_model::{
    ApiToken, Membership, Name, Org, OrgId, Pool, Project, ProjectId, Timestamp, TokenId,
    TokenSecret, User, UserId,
};

/// The store could not do what the edge asked; the message says what and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreFailure(pub Box<dyn std::error::Error + Send + Sync>);

/// What an [`EdgeStore`] operation gives.
pub type StoreResult<T> = Result<T, StoreFailure>;

/// The zone's store, as the access edge uses it.
#[async_trait]
pub trait EdgeStore: Send + Sync + 'static {
    /// The live token `secret` opens at `now`, if any.
    async fn authenticate_token(
        &self,
        secret: &TokenSecret,
        now: Timestamp,
    ) -> StoreResult<Option<ApiToken>>;

    /// The token with id `id`.
    async fn token(&self, id: &TokenId) -> StoreResult<ApiToken>;

    /// The user with id `id`.
    async fn user(&self, id: &UserId) -> StoreResult<User>;

    /// The user named `name` and their password hash, if they exist.
    async fn user_with_password(&self, name: &Name) -> StoreResult<Option<(User, Option<String>)>>;

    /// Every role `user` holds.
    async fn memberships_of(&self, user: &UserId) -> StoreResult<Vec<Membership>>;

    /// A new session of `user`, and the secret its cookie carries.
    async fn create_web_session(
        &self,
        user: &UserId,
        signed_in_with: &SignedInWith,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<(WebSession, SessionSecret)>;

    /// The session `secret` opens, while it lasts under `policy` at `now`.
    async fn web_session(
        &self,
        secret: &SessionSecret,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<Option<WebSession>>;

    /// Records a request of session `id` at `now`.
    async fn touch_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()>;

    /// Ends session `id` at `now`.
    async fn end_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()>;

    /// Deletes the sessions that ended or expired before `before`; how many went.
    async fn delete_old_web_sessions(&self, before: Timestamp) -> StoreResult<u64>;

    /// Every org.
    async fn orgs(&self) -> StoreResult<Vec<Org>>;

    /// The org named `name`, if there is one.
    async fn org_by_name(&self, name: &Name) -> StoreResult<Option<Org>>;

    /// The projects of org `org`.
    async fn projects(&self, org: &OrgId) -> StoreResult<Vec<Project>>;

    /// The pools of project `project`.
    async fn pools(&self, project: &ProjectId) -> StoreResult<Vec<Pool>>;

    /// Every signing key still published at `now`, the current one first.
    async fn access_keys(&self, now: Timestamp) -> StoreResult<Vec<StoredAccessKey>>;

    /// Adds signing key `kid` as the current one, retiring the others at `retire_others_at`.
    async fn add_access_key(
        &self,
        kid: &str,
        pkcs8: &[u8],
        now: Timestamp,
        retire_others_at: Timestamp,
    ) -> StoreResult<()>;
}
