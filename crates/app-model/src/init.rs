//! The starter app file `orc app init` writes.

use std::fmt::Write as _;

/// What `orc app init` asks for; every field has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starter {
    /// The app's name, also its one service's.
    pub name: String,
    /// The image.
    pub image: String,
    /// How many instances.
    pub replicas: u32,
    /// The HTTP port the image listens on.
    pub port: u16,
    /// The readiness path, or none for a TCP check.
    pub health: Option<String>,
    /// Public names served over HTTPS on the project's ingress nodes.
    pub domains: Vec<String>,
    /// Whether the service is the project's plain-HTTP catch-all on port 80.
    pub public: bool,
}

impl Default for Starter {
    fn default() -> Self {
        Self {
            name: "web".into(),
            image: "my-org/web:1".into(),
            replicas: 2,
            port: 8080,
            health: Some("/healthz".into()),
            domains: Vec::new(),
            public: false,
        }
    }
}

impl Starter {
    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "// An orc application. Check it with `orc app check orch.pkl`, see what a"
        );
        let _ = writeln!(
            out,
            "// deploy would change with `orc app plan orch.pkl`, and deploy it with"
        );
        let _ = writeln!(
            out,
            "// `orc app deploy orch.pkl --wait`. Every setting: `orc app schema`."
        );
        let _ = writeln!(out, "amends \"{}\"", crate::schema::MODULE_URI);
        out.push('\n');
        let _ = writeln!(out, "name = {:?}", self.name);
        out.push('\n');
        out.push_str("services {\n");
        let _ = writeln!(out, "  [{:?}] {{", self.name);
        let _ = writeln!(out, "    image = {:?}", self.image);
        let _ = writeln!(out, "    replicas = {}", self.replicas);
        out.push_str("    http {\n");
        let _ = writeln!(out, "      port = {}", self.port);
        if let Some(path) = &self.health {
            let _ = writeln!(out, "      healthPath = {path:?}");
        }
        if !self.domains.is_empty() {
            let quoted: Vec<String> = self.domains.iter().map(|d| format!("{d:?}")).collect();
            let _ = writeln!(
                out,
                "      // Served on the project's ingress nodes: point each name's DNS where"
            );
            let _ = writeln!(out, "      // `orc app status` says.");
            let _ = writeln!(out, "      domains {{ {} }}", quoted.join(" "));
        }
        if self.public {
            let _ = writeln!(
                out,
                "      // Every other request to port 80 of the project's ingress nodes."
            );
            out.push_str("      public = true\n");
        }
        out.push_str("    }\n");
        out.push_str("    resources {\n      cpu = \"100m\"\n      memory = \"128Mi\"\n    }\n");
        out.push_str("  }\n}\n\n");
        out.push_str("deploy {\n  maxSurge = 1\n  maxUnavailable = 0\n  autoRollback = true\n}\n");
        out
    }
}
