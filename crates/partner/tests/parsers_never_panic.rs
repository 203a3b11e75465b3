//! The map parsers and the param reader take arbitrary operator text; none may panic.

use orc_partner::maps::{GatewayShape, OsMap, PtrDomain, RegionMap};
use orc_partner::params::{self, MapSource, load_config};
use proptest::prelude::*;
use serde_json::Value;

/// Arbitrary JSON values, biased toward the shapes the maps expect.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z0-9:. -]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("vultr:fra"),
            Just("hetzner:fsn1"),
            Just("ubuntu"),
            Just("24.04"),
            Just("title"),
            Just("sites")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    "[a-z0-9-]{0,8}",
                    Just("title".to_string()),
                    Just("sites".to_string()),
                    Just("vultr".to_string()),
                    Just("hetzner".to_string()),
                    Just("family".to_string()),
                    Just("id".to_string()),
                    Just("version".to_string()),
                    Just("cpu".to_string()),
                    Just("mem".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn parse_all(text: &str) {
    let _ = RegionMap::parse(text);
    let _ = OsMap::parse(text);
    let _ = GatewayShape::parse(text);
    let _ = PtrDomain::parse(text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn map_parsers_never_panic_on_any_text(text in any::<String>()) {
        parse_all(&text);
    }

    #[test]
    fn map_parsers_never_panic_on_any_json(value in json()) {
        parse_all(&value.to_string());
        // A map that parses also normalises to text that parses to the same map.
        if let Ok(map) = RegionMap::parse(&value.to_string()) {
            prop_assert_eq!(RegionMap::parse(&map.to_normalised_json()).unwrap(), map);
        }
        if let Ok(map) = OsMap::parse(&value.to_string()) {
            prop_assert_eq!(OsMap::parse(&map.to_normalised_json()).unwrap(), map);
        }
    }

    #[test]
    fn the_param_reader_never_panics(
        values in proptest::collection::vec(any::<String>(), 31),
        set in proptest::collection::vec(any::<bool>(), 31),
    ) {
        let mut source = MapSource::new();
        for ((name, value), set) in params::all_param_names().iter().zip(&values).zip(&set) {
            if *set {
                source = source.param(name, value);
            }
        }
        match load_config(&source) {
            Ok(config) => prop_assert!(config.clouds.values().any(|c| c.is_keyed())),
            Err(errors) => prop_assert!(!errors.0.is_empty()),
        }
    }
}
