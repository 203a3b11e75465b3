//! What `orc pool create` and `orc quote` both ask for: the provider, where (class and
//! placement) and what kind of node (shape, OS, public address), as one set of options
//! flattened into both, and the quote request both send them as.

use clap::Args;
use orc_zone_api_types::views::{QuoteRequest, ShapeView};

use super::params::{parse_param, placement};

/// The provider, place and node options shared by `orc pool create` and `orc quote`. Their
/// help speaks of a pool's nodes; `QuoteArgs` rewords the options whose words differ.
#[derive(Debug, Args)]
pub struct ShapeArgs {
    /// Provider name (visible to the project).
    #[arg(long)]
    pub provider: String,
    /// Region class (eu-central); for a provider of one cloud, the cloud location (fsn1).
    #[arg(long, visible_alias = "location")]
    pub class: String,
    /// Exact plan of a provider of one cloud (cx23); sets placement plan=PLAN.
    #[arg(long)]
    pub plan: Option<String>,
    /// Provider-specific placement KEY=VALUE (repeat for more).
    #[arg(long = "placement", value_parser = parse_param)]
    pub placement: Vec<(String, String)>,
    /// vCPUs per node.
    #[arg(long)]
    pub cpu: u32,
    /// Memory per node, whole GiB.
    #[arg(long, value_parser = parse_mem)]
    pub mem: u32,
    /// Architecture: x86_64 or arm64.
    #[arg(long)]
    pub arch: Option<String>,
    /// Extra disk, GiB (repeat for more).
    #[arg(long = "disk")]
    pub disks: Vec<u32>,
    /// OS id (debian-12).
    #[arg(long)]
    pub os: String,
    /// Give the pool a public address.
    #[arg(long)]
    pub public: bool,
}

impl ShapeArgs {
    /// The quote these options ask for; a pool creation sends the same fields.
    pub fn into_quote_request(self) -> QuoteRequest {
        QuoteRequest {
            provider: self.provider,
            shape: ShapeView {
                cpu: self.cpu,
                mem: self.mem,
                arch: self.arch,
                disks: self.disks,
            },
            class: self.class,
            os: self.os,
            public: self.public,
            placement: placement(self.placement, self.plan),
        }
    }
}

/// Memory in whole GiB; a fraction is named as such rather than as a bad digit.
fn parse_mem(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(gib) => Ok(gib),
        Err(_) if text.trim().parse::<f64>().is_ok() => Err(format!(
            "memory is whole GiB: {text} is not; give 1 or more (512 MiB is not offered)"
        )),
        Err(_) => Err(format!("{text} is not a whole number of GiB")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mem;
    #[test]
    fn memory_is_whole_gib_and_a_fraction_says_so() {
        assert_eq!(parse_mem("4"), Ok(4));
        assert_eq!(
            parse_mem("0.5").unwrap_err(),
            "memory is whole GiB: 0.5 is not; give 1 or more (512 MiB is not offered)"
        );
        assert_eq!(
            parse_mem("lots").unwrap_err(),
            "lots is not a whole number of GiB"
        );
    }

    use clap::Parser;
    use serde_json::{Value, json};

    use super::*;

    #[derive(Debug, Parser)]
    struct Line {
        #[command(flatten)]
        shape: ShapeArgs,
    }

    /// The JSON quote request of an `orc` command line's shape options, given as one string.
    fn body_of(line: &str) -> Value {
        let line = Line::try_parse_from(std::iter::once("orc").chain(line.split(' '))).unwrap();
        serde_json::to_value(line.shape.into_quote_request()).unwrap()
    }

    #[test]
    fn options_become_the_request_and_plan_wins_over_a_placement_plan() {
        let body = body_of(concat!(
            "--provider partner --location fsn1 --cpu 2 --mem 4 --arch arm64 --disk 20 ",
            "--disk 40 --os debian-12 --public --placement plan=cx22 --placement zone=a ",
            "--plan cx23",
        ));
        assert_eq!(
            body,
            json!({
                "provider": "partner",
                "shape": {"cpu": 2, "mem": 4, "arch": "arm64", "disks": [20, 40]},
                "class": "fsn1",
                "os": "debian-12",
                "public": true,
                "placement": {"plan": "cx23", "zone": "a"},
            })
        );
    }

    #[test]
    fn unset_options_send_null_empty_and_false() {
        let body = body_of("--provider core --class local --cpu 1 --mem 1 --os host");
        assert_eq!(
            body,
            json!({
                "provider": "core",
                "shape": {"cpu": 1, "mem": 1, "arch": null, "disks": []},
                "class": "local",
                "os": "host",
                "public": false,
                "placement": {},
            })
        );
    }
}
