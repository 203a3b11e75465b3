//! A project's secrets over the API: set, list and delete; who may; names and values refused
//! naming their field; a value never in an answer, an error or an event, and never seen from
//! another project.

use crate::api_support::{TestZone, tenancy};
use orc_testkit::zone::Answer;
use orc_zone::store::SecretName;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const WEB: &str = "/api/orgs/acme/projects/web";
const DATA: &str = "/api/orgs/acme/projects/data";

/// The value a project's store holds for `name`, opened.
async fn stored(z: &TestZone, project: &str, name: &str) -> Option<String> {
    let store = z.zone.store();
    let project = store
        .project_by_path(&"acme".parse().unwrap(), &project.parse().unwrap())
        .await
        .unwrap();
    let name: SecretName = name.parse().unwrap();
    store
        .secret_value(&project.id, &name)
        .await
        .unwrap()
        .map(|v| v.to_string())
}

/// Asserts no answer in `answers` holds `value` anywhere in its body.
fn none_holds(answers: &[&Answer], value: &str) {
    for answer in answers {
        assert!(
            !answer.body.to_string().contains(value),
            "an answer holds the value: {}",
            answer.body
        );
    }
}

fn set_body(value: &str) -> Value {
    json!({ "value": value })
}

#[tokio::test]
async fn members_set_list_and_delete_and_no_answer_or_event_holds_a_value() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let first = "first-Secret-Value-3kq";
    let second = "second-Secret-Value-9zx";

    let set = z
        .put(
            &format!("{WEB}/secrets/db-password"),
            &t.mia,
            set_body(first),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    assert_eq!(set.body["name"], "db-password");
    assert_eq!(set.body["version"], 1);
    assert_eq!(set.body["updated_by"], "mia");
    assert!(set.body["updated_at"].as_i64().unwrap() > 0);
    assert!(set.body.get("value").is_none(), "{}", set.body);
    assert_eq!(
        stored(&z, "web", "db-password").await.as_deref(),
        Some(first)
    );

    // The org's owner sets it again: the next version, the new value.
    let again = z
        .put(
            &format!("{WEB}/secrets/db-password"),
            &t.olivia,
            set_body(second),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(
        (&again.body["version"], &again.body["updated_by"]),
        (&json!(2), &json!("olivia"))
    );
    assert_eq!(
        stored(&z, "web", "db-password").await.as_deref(),
        Some(second)
    );
    // A zone operator may too.
    let operator = z
        .put(&format!("{WEB}/secrets/api.key"), &z.admin, set_body(first))
        .await;
    assert_eq!(operator.status, StatusCode::OK, "{}", operator.body);

    // A viewer lists names and versions, by name, never a value.
    let listed = z.get(&format!("{WEB}/secrets"), &t.vic).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let rows: Vec<(String, u64, String)> = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["version"].as_u64().unwrap(),
                s["updated_by"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("api.key".to_string(), 1, "admin".to_string()),
            ("db-password".to_string(), 2, "olivia".to_string()),
        ]
    );

    let deleted = z
        .delete(&format!("{WEB}/secrets/db-password"), &t.mia)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    assert_eq!(stored(&z, "web", "db-password").await, None);
    let gone = z
        .delete(&format!("{WEB}/secrets/db-password"), &t.mia)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.body);
    assert_eq!(gone.field(), Some("name"));
    assert_eq!(
        gone.body["error"]["message"],
        "secret db-password not found in project acme/web"
    );
    let after = z.get(&format!("{WEB}/secrets"), &t.vic).await;
    let names: Vec<&str> = after
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api.key"]);

    // Events say who set which version and who deleted it, never what it held.
    let events = z.get(&format!("{WEB}/events"), &t.vic).await;
    assert_eq!(events.status, StatusCode::OK, "{}", events.body);
    let secret_events: Vec<(&str, &str)> = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"].as_str().unwrap().starts_with("secret."))
        .map(|e| (e["kind"].as_str().unwrap(), e["words"].as_str().unwrap()))
        .collect();
    assert_eq!(
        secret_events,
        [
            ("secret.set", "secret db-password set (version 1) by mia"),
            ("secret.set", "secret db-password set (version 2) by olivia"),
            ("secret.set", "secret api.key set (version 1) by admin"),
            ("secret.deleted", "secret db-password deleted by mia"),
        ]
    );
    for value in [first, second] {
        none_holds(
            &[
                &set, &again, &operator, &listed, &deleted, &gone, &after, &events,
            ],
            value,
        );
    }
}

#[tokio::test]
async fn viewers_only_list_and_strangers_see_no_project() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let path = format!("{WEB}/secrets/db-password");
    let value = "viewer-Cannot-Set-This";

    let by_viewer = z.put(&path, &t.vic, set_body(value)).await;
    assert_eq!(
        by_viewer.status,
        StatusCode::FORBIDDEN,
        "{}",
        by_viewer.body
    );
    assert!(
        by_viewer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs the member role in project acme/web"),
        "{}",
        by_viewer.body
    );
    assert_eq!(stored(&z, "web", "db-password").await, None);

    let set = z.put(&path, &t.mia, set_body(value)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let delete_by_viewer = z.delete(&path, &t.vic).await;
    assert_eq!(delete_by_viewer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        z.get(&format!("{WEB}/secrets"), &t.vic).await.status,
        StatusCode::OK
    );

    // stan holds no role in acme: the project does not exist for him, whatever he asks.
    let stranger = [
        z.get(&format!("{WEB}/secrets"), &t.stan).await,
        z.put(&path, &t.stan, set_body("stan-Was-Here")).await,
        z.delete(&path, &t.stan).await,
    ];
    for answer in &stranger {
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
        assert_eq!(answer.field(), Some("org"), "{}", answer.body);
    }
    // mia is a member of acme/web only: acme/data is not hers to see.
    let elsewhere = z
        .put(
            &format!("{DATA}/secrets/db-password"),
            &t.mia,
            set_body(value),
        )
        .await;
    assert_eq!(
        elsewhere.status,
        StatusCode::NOT_FOUND,
        "{}",
        elsewhere.body
    );
    assert_eq!(elsewhere.field(), Some("project"));
    assert_eq!(
        stored(&z, "web", "db-password").await.as_deref(),
        Some(value),
        "nothing but mia's set changed it"
    );
    none_holds(&[&by_viewer, &set, &delete_by_viewer, &elsewhere], value);
    none_holds(&stranger.iter().collect::<Vec<_>>(), "stan-Was-Here");
}

#[tokio::test]
async fn bad_names_and_values_are_refused_naming_the_field() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let long_name = "n".repeat(64);
    for name in ["Upper", "-dash-first", "has%20space", long_name.as_str()] {
        let answer = z
            .put(
                &format!("{WEB}/secrets/{name}"),
                &t.mia,
                set_body("fine-Value"),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{name}: {}",
            answer.body
        );
        assert_eq!(answer.field(), Some("name"), "{name}: {}", answer.body);
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is not a secret name: it must be 1 to 63 of a-z, 0-9"),
            "{}",
            answer.body
        );
        let deleted = z.delete(&format!("{WEB}/secrets/{name}"), &t.mia).await;
        assert_eq!(deleted.status, StatusCode::BAD_REQUEST, "{}", deleted.body);
        assert_eq!(deleted.field(), Some("name"));
    }

    let path = format!("{WEB}/secrets/db-password");
    let empty = z.put(&path, &t.mia, set_body("")).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{}", empty.body);
    assert_eq!(empty.field(), Some("value"));
    assert_eq!(
        empty.body["error"]["message"],
        "value: a secret's value must not be empty"
    );

    let too_large = "x".repeat(64 * 1024 + 1);
    let large = z.put(&path, &t.mia, set_body(&too_large)).await;
    assert_eq!(large.status, StatusCode::BAD_REQUEST);
    assert_eq!(large.field(), Some("value"));
    assert_eq!(
        large.body["error"]["message"],
        "value: a secret's value holds at most 65536 bytes (64 KiB)"
    );
    let just_fits = "y".repeat(64 * 1024);
    let fits = z.put(&path, &t.mia, set_body(&just_fits)).await;
    assert_eq!(fits.status, StatusCode::OK, "{}", fits.body);
    assert_eq!(
        stored(&z, "web", "db-password").await.map(|v| v.len()),
        Some(64 * 1024)
    );

    // A value of the wrong type is refused without being quoted back.
    let number = z.put(&path, &t.mia, json!({ "value": 982_451_653 })).await;
    assert_eq!(number.status, StatusCode::BAD_REQUEST);
    assert_eq!(number.field(), Some("value"));
    assert_eq!(
        number.body["error"]["message"],
        "value: must be text (a JSON string)"
    );
    assert!(
        !number.body.to_string().contains("982451653"),
        "{}",
        number.body
    );
    let missing = z.put(&path, &t.mia, json!({})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.field(), Some("value"));
    let unknown = z
        .put(&path, &t.mia, json!({ "value": "ok-Value", "note": "x" }))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.field(), Some("note"));
    let not_json = z
        .http
        .request(Method::PUT, format!("{}{path}", z.zone.url()))
        .bearer_auth(&t.mia)
        .body("plain-Text-Value")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(!not_json.text().await.unwrap().contains("plain-Text-Value"));

    // None of the refusals changed what is stored.
    let listed = z.get(&format!("{WEB}/secrets"), &t.mia).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1, "{}", listed.body);
    assert_eq!(listed.body[0]["version"], 1);
    none_holds(&[&large, &fits, &listed], &just_fits[..64]);
}

#[tokio::test]
async fn a_secret_of_one_project_is_not_seen_from_another() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let value = "web-Only-Value-5hd";
    let set = z
        .put(
            &format!("{WEB}/secrets/db-password"),
            &t.mia,
            set_body(value),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);

    // olivia owns the whole org: acme/data is hers to see, and holds no such secret.
    let listed = z.get(&format!("{DATA}/secrets"), &t.olivia).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body, json!([]));
    assert_eq!(stored(&z, "data", "db-password").await, None);
    let delete = z
        .delete(&format!("{DATA}/secrets/db-password"), &t.olivia)
        .await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND, "{}", delete.body);
    assert_eq!(
        delete.body["error"]["message"],
        "secret db-password not found in project acme/data"
    );

    // The same name in acme/data is a secret of its own.
    let own = z
        .put(
            &format!("{DATA}/secrets/db-password"),
            &t.olivia,
            set_body("data-Only-Value-2mw"),
        )
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    assert_eq!(own.body["version"], 1);
    assert_eq!(
        stored(&z, "web", "db-password").await.as_deref(),
        Some(value)
    );
    assert_eq!(
        stored(&z, "data", "db-password").await.as_deref(),
        Some("data-Only-Value-2mw")
    );
    let data_events = z.get(&format!("{DATA}/events"), &t.olivia).await;
    none_holds(&[&listed, &delete, &own, &data_events], value);
    assert!(
        !data_events.body.to_string().contains("by mia"),
        "web's events stay in web: {}",
        data_events.body
    );
}
