//! Params → typed [`Config`], purely.
//!
//! Param `name` arrives as the environment variable `ORC_PARAM_<NAME>` (upper case) or, for
//! values delivered as files (JSON params, and any param the zone chooses), as the path in
//! `ORC_PARAM_<NAME>_FILE`. Reading goes through [`ParamSource`], so tests feed a
//! [`MapSource`] and the process its environment (the adapter lives in
//! `orc-partner-provider`); [`load_config`] itself does no I/O but what the source does.
//!
//! Parts: [`names`] (param and variable names), [`source`] (where params come from),
//! [`config`] (the typed config, its view and the errors), [`reader`] (reading and
//! checking every param).
//!
//! Rules: surrounding whitespace is trimmed and an empty param takes its default. Every param
//! that cannot be read is reported, each error naming the param and what is wrong, so one
//! failed start shows the operator everything to fix. Sensitive params (the cloud keys) are
//! held in [`crate::secret::Secret`] and no error ever contains any of their characters.

pub mod config;
pub mod names;
pub mod reader;
pub mod source;

pub use config::*;
pub use names::*;
pub use reader::load_config;
pub use source::*;

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;
    use url::Url;

    use crate::ids::{Cloud, PlanId};
    use crate::maps::{GatewayShape, OsMap, RegionMap};
    use crate::secret::Secret;

    const KEY: &str = "hZ9secretKEYvalue0123456789";
    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDnNVNSexvf0oW7ZTYi4F+xpqN8ZHXgrpOJJS1X6H2dF ops@example";

    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDHpJQ8vWS6ebM1Kq/kn6plpZjbxBOg15VsfOn4qKCAQ/0AnBXDGyOCdLKo0gZJkk9Gng0Ml2QBjajMZfPSgd8k91Hd8RtHugodvjUcyhnwHAUsLoE0UNpyOCEbTuoxhLQxSCCEdaJzusGLHbvxDWDjoKc7FQMJehWtYiUiXvsBdqzFXrXGC6oph2JUaGDtzSG4RHa7qpC1Cus7o2MYIKgr6zAuZGCAqC6hjwvnmFC9PHttn6mbKOEhr05WHR6y6FaT18EhdogbDfGYToh0PHESoEZsILKHFpAzBmy0fOXrVQ5dJNmnqpjkwp4ZpyIUJlHMUPM29wOYMuRxbpAZ7me1 rsa@x";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAbv9qs85+wdsvY6K1PPX7Ec9Zidi/NJBXpJCRynWrg5TxiBVsjHWooHNinrXRB+wcfScH5wmlLio4AVzS9gmPs= ec@x";

    fn minimal() -> MapSource {
        MapSource::new()
            .param(PARTNER_ID, "zone-1")
            .param("hetzner_api_token", KEY)
            .param("hetzner_owner_tag", "orc-partner-hetzner")
    }

    fn errors(source: &MapSource) -> Vec<ParamError> {
        load_config(source).unwrap_err().0
    }

    #[test]
    fn minimal_params_take_every_default() {
        let config = load_config(&minimal()).unwrap();
        assert_eq!(config.resource_uri(), "urn:orc:partner:zone-1");
        assert_eq!(config.regions, RegionMap::builtin());
        assert_eq!(config.os_map, OsMap::builtin());
        assert_eq!(config.gateway, GatewayShape { cpu: 1, mem_gib: 2 });
        assert!(config.ptr_domain.is_none() && config.access_keys_url.is_none());
        let h = config.cloud(Cloud::Hetzner).unwrap();
        assert_eq!(h.key.as_ref().map(Secret::expose), Some(KEY));
        assert!(h.enabled && h.regions.is_none() && h.plans.is_none() && h.images.is_none());
        assert_eq!(h.pool_ipv4_limit, 10);
        assert_eq!(h.exchange_rate, None);
        assert_eq!(h.usd_rate(orc_common::Currency::EUR), None);
        assert_eq!(h.usd_rate(orc_common::Currency::USD), Some(Decimal::ONE));
        assert_eq!(h.endpoint.as_str(), "https://api.hetzner.cloud/v1");
        let v = config.cloud(Cloud::Vultr).unwrap();
        assert!(!v.is_keyed());
        assert_eq!(v.endpoint.as_str(), "https://api.vultr.com/");
    }

    #[test]
    fn every_param_reads_its_value() {
        let source = minimal()
            .param(GATEWAY, r#"{"cpu": 2, "mem": 4}"#)
            .param(PTR_DOMAIN, "cloud.example.com")
            .param(
                ACCESS_KEYS_URL,
                "https://zone.example.com/.well-known/orc-access/jwks.json",
            )
            .param(SSH_KEYS, &format!("{ED25519}\n\n{RSA}\r\n  {ECDSA}\n"))
            .param("vultr_api_key", "V1")
            .param("vultr_owner_tag", "orc partner vultr")
            .param("vultr_enabled", "false")
            .param("vultr_also_owned_tags", "old-1, old-2")
            .param("vultr_regions", "ewr,sea")
            .param("vultr_plans", "vc2-2c-4gb, vhf-2c-4gb")
            .param("vultr_images", "ubuntu,2284")
            .param("vultr_max_nodes", "25")
            .param("vultr_max_monthly_spend", "999.50")
            .param("vultr_exchange_rate", "1")
            .param("vultr_gateway_plan", "vc2-1c-2gb")
            .param("vultr_pool_ipv4_limit", "3")
            .var("ORC_VULTR_ENDPOINT", "http://127.0.0.1:9000")
            .param_file(REGIONS, "/params/regions", crate::maps::BUILTIN_REGIONS);
        let config = load_config(&source).unwrap();
        let algorithms: Vec<String> = config
            .ssh_keys
            .iter()
            .map(|k| k.algorithm().to_string())
            .collect();
        assert_eq!(
            algorithms,
            ["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256"]
        );
        assert_eq!(config.gateway.cpu, 2);
        assert_eq!(config.ptr_domain.unwrap().as_str(), "cloud.example.com");
        let v = config.clouds[&Cloud::Vultr].clone();
        assert!(!v.enabled);
        assert_eq!(v.owner_tag.unwrap().as_str(), "orc partner vultr");
        assert_eq!(v.also_owned_tags.len(), 2);
        assert_eq!(v.regions.unwrap().len(), 2);
        assert!(
            v.plans
                .unwrap()
                .contains(&PlanId::new("vhf-2c-4gb").unwrap())
        );
        assert!(v.images.unwrap().contains("2284"));
        assert_eq!(v.max_nodes, Some(25));
        assert_eq!(v.max_monthly_spend, Some(Decimal::new(99950, 2)));
        assert_eq!(v.exchange_rate, Some(Decimal::ONE));
        assert_eq!(v.gateway_plan, Some(PlanId::new("vc2-1c-2gb").unwrap()));
        assert_eq!(v.pool_ipv4_limit, 3);
        assert_eq!(v.endpoint.as_str(), "http://127.0.0.1:9000/");
    }

    #[test]
    fn an_empty_param_takes_its_default() {
        let config = load_config(
            &minimal()
                .param("hetzner_pool_ipv4_limit", "  ")
                .param(GATEWAY, ""),
        )
        .unwrap();
        assert_eq!(
            config.cloud(Cloud::Hetzner).unwrap().pool_ipv4_limit,
            DEFAULT_POOL_IPV4_LIMIT
        );
        assert_eq!(config.gateway, GatewayShape::default());
    }

    /// Every param gets at least one bad value, and the error names it.
    #[test]
    fn every_bad_param_is_named() {
        let cases: &[(&str, &str)] = &[
            (PARTNER_ID, "zone:1"),
            (PARTNER_ID, "zone 1"),
            (
                REGIONS,
                r#"{"eu": {"title": "E", "sites": [{"eu": "vultr:fra"}]}}"#,
            ),
            (OS_MAP, r#"{"x": {"title": "X"}}"#),
            (GATEWAY, r#"{"cpu": 0, "mem": 2}"#),
            (PTR_DOMAIN, "not a domain"),
            (ACCESS_KEYS_URL, "http://zone.example.com/jwks.json"),
            (ACCESS_KEYS_URL, "::nonsense"),
            (ACCESS_KEYS_URL, "https://ops@zone.example.com/jwks.json"),
            (ACCESS_KEYS_URL, "HTTPS://zone.example.com/jwks.json"),
            (SSH_KEYS, "ssh-rsa not-base64!"),
            (SSH_KEYS, "# a comment is not a key"),
            ("hetzner_api_token", "has space"),
            ("vultr_api_key", "tab\tinside"),
            ("hetzner_enabled", "yes"),
            ("vultr_enabled", "0"),
            ("hetzner_owner_tag", "-starts-with-dash"),
            ("hetzner_owner_tag", &"a".repeat(64)),
            ("vultr_owner_tag", "a,b"),
            ("hetzner_also_owned_tags", "ok,,ok2"),
            ("vultr_also_owned_tags", " ,x"),
            ("hetzner_regions", "FSN1"),
            ("vultr_regions", "ewr,ewr"),
            ("hetzner_plans", "CX23"),
            ("vultr_plans", "vc2 2c"),
            ("hetzner_images", "Ubuntu"),
            ("vultr_images", "a b"),
            ("hetzner_max_nodes", "-1"),
            ("vultr_max_nodes", "ten"),
            ("hetzner_max_monthly_spend", "$100"),
            ("vultr_max_monthly_spend", "-5"),
            ("hetzner_exchange_rate", "0"),
            ("vultr_exchange_rate", "1,08"),
            ("hetzner_gateway_plan", "CX23!"),
            ("vultr_gateway_plan", "bad plan"),
            ("hetzner_pool_ipv4_limit", "many"),
            ("vultr_pool_ipv4_limit", "1.5"),
        ];
        for (param, bad) in cases {
            let source = minimal()
                .param("vultr_api_key", "V1")
                .param("vultr_owner_tag", "orc-vultr")
                .param(param, bad);
            let errs = errors(&source);
            assert!(
                errs.iter().any(|e| e.param == *param),
                "{param}={bad:?} gave {errs:?}"
            );
            let text = ConfigErrors(errs).to_string();
            assert!(text.contains(&format!("param {param}:")), "{text}");
        }
    }

    #[test]
    fn structural_errors_name_their_params() {
        let errs = errors(&MapSource::new());
        let params: Vec<&str> = errs.iter().map(|e| e.param.as_str()).collect();
        assert_eq!(params, [PARTNER_ID, "hetzner_api_token, vultr_api_key"]);

        let errs = errors(
            &MapSource::new()
                .param(PARTNER_ID, "z")
                .param("vultr_api_key", "k"),
        );
        assert_eq!(errs[0].param, "vultr_owner_tag");
        assert_eq!(
            errs[0].problem,
            ParamProblem::RequiredWithKey {
                key: "vultr_api_key"
            }
        );

        let errs = errors(&minimal().var("ORC_HETZNER_ENDPOINT", "ftp://x"));
        assert_eq!(errs[0].param, "ORC_HETZNER_ENDPOINT");

        let errs = errors(
            &minimal()
                .param(GATEWAY, "{}")
                .param_file(GATEWAY, "/p/gateway", "{}"),
        );
        assert!(matches!(errs[0].problem, ParamProblem::ValueAndFile { .. }));

        let source = minimal().var(&param_file_var(OS_MAP), "/missing");
        let errs = errors(&source);
        assert_eq!(errs[0].param, OS_MAP);
        assert!(errs[0].to_string().contains("/missing"), "{}", errs[0]);
    }

    #[test]
    fn all_errors_are_collected() {
        let source = MapSource::new()
            .param(PARTNER_ID, "a:b")
            .param("hetzner_api_token", KEY)
            .param("hetzner_max_nodes", "x")
            .param(GATEWAY, "[]");
        let errs = errors(&source);
        let params: Vec<&str> = errs.iter().map(|e| e.param.as_str()).collect();
        assert_eq!(
            params,
            [
                PARTNER_ID,
                GATEWAY,
                "hetzner_owner_tag",
                "hetzner_max_nodes"
            ]
        );
    }

    #[test]
    fn keys_never_appear_in_debug_or_errors() {
        let config = load_config(&minimal().param(SSH_KEYS, ED25519)).unwrap();
        let view = serde_json::to_string(&config.view()).unwrap();
        assert!(!view.contains(KEY) && !view.contains("hZ9"), "{view}");
        assert!(view.contains(r#""key_set":true"#), "{view}");
        assert!(view.contains("ssh-ed25519 SHA256:"), "{view}");
        assert!(!format!("{config:?}").contains(KEY));
        assert!(!format!("{config:#?}").contains("hZ9"));
        let bad_key = "hZ9 secret with space";
        let errs = load_config(&minimal().param("hetzner_api_token", bad_key)).unwrap_err();
        let shown = format!("{errs} {errs:?}");
        assert!(!shown.contains("hZ9"), "{shown}");
        assert!(!shown.contains("secret with"), "{shown}");
        assert!(shown.contains("hetzner_api_token"));
    }

    #[test]
    fn built_in_endpoints_parse() {
        for cloud in Cloud::ALL {
            assert!(Url::parse(cloud.default_endpoint()).is_ok());
        }
    }

    #[test]
    fn param_names_cover_both_clouds() {
        let names = all_param_names();
        assert_eq!(names.len(), 7 + 2 * 12);
        assert!(names.contains(&"hetzner_api_token".to_string()));
        assert!(names.contains(&"vultr_pool_ipv4_limit".to_string()));
        assert_eq!(param_var("vultr_api_key"), "ORC_PARAM_VULTR_API_KEY");
        assert_eq!(param_file_var("os_map"), "ORC_PARAM_OS_MAP_FILE");
    }
}
