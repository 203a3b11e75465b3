//! The store's rows the `core` provider needs: its provider row in `sys/sys` and the apps
//! user whose tokens slots dial the zone with.

use orc_zone_model::{
    ModelError, Name, NewProvider, PricingStrategy, Provider, ProviderScope, Timestamp, UserId,
    sys_project_id,
};
use orc_zone_store::{Kind, Store, StoreError};

use crate::error::AppsError;
use crate::{APPS_USER, CORE_PROVIDER, CORE_RESOURCE_URI};

pub(crate) async fn ensure_core_provider(store: &Store) -> Result<Provider, AppsError> {
    let store_error = |what| move |source| AppsError::Store { what, source };
    let core_name: Name = CORE_PROVIDER
        .parse()
        .map_err(|e: ModelError| AppsError::Store {
            what: "the core provider's name",
            source: StoreError::Invalid {
                kind: Kind::Provider,
                id: CORE_PROVIDER.to_string(),
                reason: e.to_string(),
            },
        })?;
    let find = || async {
        store
            .list_providers_for(&sys_project_id())
            .await
            .map(|all| {
                all.into_iter()
                    .find(|p| p.project_id == sys_project_id() && p.name == core_name)
            })
    };
    let existing = find().await.map_err(store_error("listing providers"))?;
    let provider = match existing {
        Some(provider) => provider,
        None => {
            let new = NewProvider {
                project_id: sys_project_id(),
                name: core_name.clone(),
                resource_uri: CORE_RESOURCE_URI.to_string(),
                scope: ProviderScope::Zone,
                pricing: PricingStrategy::None,
            };
            match store.create_provider(&new, Timestamp::now()).await {
                Ok(provider) => provider,
                Err(StoreError::Unique { .. }) => find()
                    .await
                    .map_err(store_error("reading the core provider"))?
                    .ok_or_else(|| AppsError::Store {
                        what: "the core provider",
                        source: StoreError::NotFound {
                            kind: Kind::Provider,
                            id: CORE_PROVIDER.to_string(),
                        },
                    })?,
                Err(source) => {
                    return Err(AppsError::Store {
                        what: "creating the core provider",
                        source,
                    });
                }
            }
        }
    };
    if provider.scope == ProviderScope::Zone {
        Ok(provider)
    } else {
        store
            .set_provider_scope(&provider.id, ProviderScope::Zone, Timestamp::now())
            .await
            .map_err(store_error("widening the core provider to scope zone"))
    }
}

/// Takes every role and every non-service token from the apps user: an older zone made it a
/// member of each app pool's project with tokens that worked on the whole API.
pub(crate) async fn retire_shared_powers(store: &Store, user: &UserId) -> Result<(), AppsError> {
    let failed = |what: &'static str| move |source| AppsError::Store { what, source };
    for membership in store
        .list_memberships_of_user(user)
        .await
        .map_err(failed("reading the apps user's memberships"))?
    {
        store
            .remove_membership(&membership.id)
            .await
            .map_err(failed("removing a membership of the apps user"))?;
        tracing::info!(membership = %membership.id, "removed a role of the apps user; app pools use service credentials");
    }
    let now = Timestamp::now();
    for token in store
        .list_tokens(user)
        .await
        .map_err(failed("reading the apps user's tokens"))?
    {
        if token.service_pool.is_none() && token.revoked_at.is_none() {
            store
                .revoke_token(&token.id, now)
                .await
                .map_err(failed("revoking an old app token"))?;
        }
    }
    Ok(())
}

pub(crate) async fn ensure_apps_user(store: &Store) -> Result<UserId, AppsError> {
    let name: Name = APPS_USER
        .parse()
        .map_err(|e: ModelError| AppsError::Store {
            what: "the apps user's name",
            source: StoreError::Invalid {
                kind: Kind::User,
                id: APPS_USER.to_string(),
                reason: e.to_string(),
            },
        })?;
    match store.user_by_name(&name).await {
        Ok(user) => Ok(user.id),
        Err(StoreError::NotFound { .. }) => {
            match store.create_user(&name, Timestamp::now()).await {
                Ok(user) => Ok(user.id),
                Err(StoreError::Unique { .. }) => store
                    .user_by_name(&name)
                    .await
                    .map(|u| u.id)
                    .map_err(|source| AppsError::Store {
                        what: "reading the apps user",
                        source,
                    }),
                Err(source) => Err(AppsError::Store {
                    what: "creating the apps user",
                    source,
                }),
            }
        }
        Err(source) => Err(AppsError::Store {
            what: "reading the apps user",
            source,
        }),
    }
}
