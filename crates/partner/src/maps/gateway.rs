//! The gateway shape: the smallest site gateway, `{"cpu": <vCPUs>, "mem": <GiB>}`.
//!
//! It is a minimum, not an exact fit: per location the quote takes the cheapest x86 plan with
//! at least this much CPU and memory, unless the cloud names a `<cloud>_gateway_plan`.

use serde_json::{Map, Value};

use super::{MapError, MapProblem, Problems, excerpt, parse_json};

/// The largest vCPU count or GiB the gateway shape admits.
const MAX_CPU: u64 = 512;
const MAX_MEM_GIB: u64 = 4096;

/// The minimum vCPUs and memory of a site gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GatewayShape {
    pub cpu: u32,
    #[serde(rename = "mem")]
    pub mem_gib: u32,
}

impl Default for GatewayShape {
    /// `{"cpu": 1, "mem": 2}`: the smallest shape both clouds sell in every built-in location.
    fn default() -> Self {
        GatewayShape { cpu: 1, mem_gib: 2 }
    }
}

impl GatewayShape {
    /// Parses and checks the JSON text of the `gateway` param.
    pub fn parse(text: &str) -> Result<GatewayShape, Vec<MapError>> {
        let value = parse_json(text)?;
        let mut problems = Problems::default();
        let Some(object) = value.as_object() else {
            problems.push("$", MapProblem::WrongType { expected: "object" });
            return Err(problems.0);
        };
        for key in object.keys() {
            if key != "cpu" && key != "mem" {
                problems.push(excerpt(key), MapProblem::UnknownField { known: "cpu, mem" });
            }
        }
        let cpu = number(&mut problems, object, "cpu", MAX_CPU);
        let mem_gib = number(&mut problems, object, "mem", MAX_MEM_GIB);
        problems.finish(GatewayShape { cpu, mem_gib })
    }

    /// The normalised JSON form.
    pub fn to_normalised_json(&self) -> String {
        let mut out = Map::new();
        out.insert("cpu".to_string(), Value::from(self.cpu));
        out.insert("mem".to_string(), Value::from(self.mem_gib));
        serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default()
    }
}

fn number(problems: &mut Problems, object: &Map<String, Value>, field: &str, max: u64) -> u32 {
    let range = MapProblem::OutOfRange { min: 1, max };
    match object.get(field) {
        None => {
            problems.push(field, MapProblem::Missing);
            0
        }
        Some(v) => match v.as_u64().filter(|n| (1..=max).contains(n)) {
            Some(n) => u32::try_from(n).unwrap_or(0),
            None => {
                problems.push(field, range);
                0
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!(
            GatewayShape::parse(r#"{"cpu": 2, "mem": 4}"#).unwrap(),
            GatewayShape { cpu: 2, mem_gib: 4 }
        );
        let errors = GatewayShape::parse(r#"{"cpu": 0, "mem": 1.5, "disk": 3}"#).unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "disk: is not a known field (known: cpu, mem)",
                "cpu: must be a whole number from 1 to 512",
                "mem: must be a whole number from 1 to 4096",
            ]
        );
        assert!(GatewayShape::parse(r#"{"cpu": 1}"#).is_err());
        let default = GatewayShape::default();
        assert_eq!(
            GatewayShape::parse(&default.to_normalised_json()).unwrap(),
            default
        );
    }
}
