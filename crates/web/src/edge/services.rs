//! Apps' private services, which the edge serves at `<project>--<app>-<service>.<org>.<zone
//! domain>` like a pool's endpoint: signed in, with the signed assertion. Their replicas run
//! on nodes, on the project's mesh, so the edge reaches them through whatever the zone
//! gives it ([`PrivateServices::connect`]: a byte stream relayed by the node's agent).

use orc_zone_model::{Project, ProjectId};
use tokio::io::DuplexStream;

/// A ready replica of a private service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateReplica {
    pub slot: u32,
    /// The node that runs it.
    pub node: String,
    /// Its address and the service's port (`10.96.3.2:8080`).
    pub address: String,
}

/// Where the edge finds apps' private services and how it reaches their replicas.
#[async_trait::async_trait]
pub trait PrivateServices: Send + Sync + 'static {
    /// `(app, service)` of every private service the apps of `project` declare.
    async fn private_services(&self, project: &ProjectId) -> Result<Vec<(String, String)>, String>;
    /// The ready replicas of `service` of `app`, by slot.
    async fn replicas(
        &self,
        project: &ProjectId,
        app: &str,
        service: &str,
    ) -> Result<Vec<PrivateReplica>, String>;
    /// A byte stream to `address` on `node`.
    async fn connect(&self, node: &str, address: &str) -> Result<DuplexStream, String>;
}

/// No private services (an edge without a zone's nodes, as in tests of pools alone).
#[derive(Debug, Default)]
pub struct NoPrivateServices;

#[async_trait::async_trait]
impl PrivateServices for NoPrivateServices {
    async fn private_services(&self, _: &ProjectId) -> Result<Vec<(String, String)>, String> {
        Ok(Vec::new())
    }

    async fn replicas(
        &self,
        _: &ProjectId,
        _: &str,
        _: &str,
    ) -> Result<Vec<PrivateReplica>, String> {
        Ok(Vec::new())
    }

    async fn connect(&self, node: &str, _: &str) -> Result<DuplexStream, String> {
        Err(format!("node {node} is out of reach"))
    }
}

/// A private service of an org, as the edge names it.
#[derive(Debug, Clone)]
pub(super) struct OrgService {
    pub project: Project,
    pub app: String,
    pub service: String,
}

impl OrgService {
    /// The pool-like name it reads as: `<app>-<service>`.
    pub(super) fn label(&self) -> String {
        format!("{}-{}", self.app, self.service)
    }
}
