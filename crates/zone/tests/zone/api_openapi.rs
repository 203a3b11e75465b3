//! The committed OpenAPI document (`crates/zone/openapi.json`) is the one the code generates.
//!
//! After changing the API, regenerate it with
//! `ORC_BLESS=1 cargo nextest run -p orc-zone -E 'test(/^api_openapi::/)'` and commit the file.

use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi.json")
}

#[test]
fn committed_openapi_document_matches_the_code() {
    let generated = orc_zone::api::openapi_pretty_json();
    let path = committed_path();
    if std::env::var_os("ORC_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "crates/zone/openapi.json differs from the generated document; regenerate it with \
         ORC_BLESS=1 cargo nextest run -p orc-zone -E 'test(/^api_openapi::/)' and commit it"
    );
}

#[test]
fn the_document_describes_the_change_scope_path_and_error_shape() {
    let doc: serde_json::Value =
        serde_json::from_str(&orc_zone::api::openapi_pretty_json()).unwrap();
    let path =
        &doc["paths"]["/api/orgs/{org}/projects/{project}/providers/{provider}/change-scope"];
    assert!(path["post"].is_object(), "change-scope is documented");
    let error = &doc["components"]["schemas"]["ErrorDetail"]["properties"];
    for field in ["code", "message", "field"] {
        assert!(
            error[field].is_object(),
            "ErrorDetail.{field} is documented"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}
