//! The controller's integration tests, in one binary so axum, tonic and sqlx are linked once.
//!
//! Each module is one area, named as the test filters use it (`-E 'test(/^api_pools::/)'`):
//! the HTTP API over an in-process zone (`api_*`, setup in [`api_support`]), and the hub and
//! reconcilers over loopback gRPC with fake providers on a manual clock (`hub_failover`,
//! `reconcile_nodes`, setup in [`hub_support`]). The store and the app supervisor have their
//! own suites in `orc-zone-store` and `orc-zone-apps`.

mod api_support;
mod apps_on_nodes;
mod hub_support;
mod other_registry;

mod access_keys;
mod agents;
mod api_apps;
mod api_auth;
mod api_e2e;
mod api_images;
mod api_openapi;
mod api_pools;
mod api_providers;
mod api_quote;
mod api_registry;
mod api_secrets;
mod api_tenancy;
mod console;
mod edge;
mod hub_failover;
mod ingress;
mod mesh;
mod mesh_range;
mod reconcile_nodes;
mod rollouts;
mod security;
mod security_credentials;
mod security_providers;
mod security_tls;
mod zone_parts;
