//! Fidelity of the emulators to the published API descriptions.
//!
//! Each test drives one API area of a freshly started emulator through its endpoints —
//! creating resources first so that lists are not empty — and checks every answer: the
//! status code is the one the scenario calls for, the body matches the schema the official
//! description gives for that operation and status (success and error answers alike), the
//! content type is `application/json` and integral numbers carry no fraction. Departures
//! from the published descriptions are only those listed in `tests/openapi/overrides.json`
//! (see `docs/emulators/fidelity.md`). Robot has no published description; its shapes are
//! checked against the hand-written `tests/openapi/robot.json`.
//!
//! A test collects every finding of its area and fails once, listing them all.

mod support;

use orc_testkit::emu::Fault;
use serde_json::{Value, json};
use support::{Auth, Body, Fidelity, Flavor, Spec, World, id_at};

const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILe+AiXof1/cGvUvWA4flo27OuBjAMb0TUAKdrmtUc18 a@orc";
const KEY_A_FINGERPRINT: &str = "fa:47:c4:a0:14:cf:63:b8:54:cb:07:62:ff:b3:ca:3e";
const KEY_B: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIcZN7fvKRbEnsD7v0ZZoWCjq+TBx+6zBsXAYS+Kyqwe b@orc";

fn json_body(v: Value) -> Body {
    Body::Json(v)
}

fn not_json() -> Body {
    Body::Raw {
        content_type: Some("application/json".into()),
        bytes: b"{\"name\": ".to_vec(),
    }
}

/// Whether the list at `pointer` of `v` has an element whose `field` equals `want`.
fn list_has(v: &Value, pointer: &str, field: &str, want: &str) -> bool {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .is_some_and(|items| {
            items.iter().any(|i| match i.get(field) {
                Some(Value::String(s)) => s == want,
                Some(Value::Number(n)) => n.to_string() == want,
                _ => false,
            })
        })
}

fn list_len(v: &Value, pointer: &str) -> usize {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

// ---------------------------------------------------------------------------------------
// The harness itself
// ---------------------------------------------------------------------------------------

/// The committed descriptions load, every override applies, and every response schema of
/// every operation compiles.
#[test]
fn descriptions_load_and_compile() {
    for flavor in [Flavor::Hetzner, Flavor::Vultr, Flavor::Robot] {
        let spec = match Spec::load(flavor) {
            Ok(s) => s,
            Err(e) => panic!("{flavor:?}: {e}"),
        };
        let ops = spec.operations();
        assert!(ops.len() >= 10, "{flavor:?}: only {} operations", ops.len());
        for op in &ops {
            for status in [200, 201, 202, 204, 404] {
                if let Ok(support::spec::Expected::Json(ptr)) =
                    spec.expected(&op.method, &op.template, status)
                {
                    // Validating `null` compiles the schema; a compile error is reported
                    // as a finding naming the schema.
                    let v = spec.validate(&ptr, &Value::Null);
                    assert!(
                        v.iter().all(|m| !m.contains("does not compile")),
                        "{flavor:?} {} {} {status}: {v:?}",
                        op.method,
                        op.template
                    );
                }
            }
        }
    }
}

/// The harness rejects what the descriptions rule out: a field the description does not
/// know, a missing required field, a wrong type, a stale field removed by an override, an
/// undocumented status; and accepts the live shapes the overrides document.
#[test]
fn harness_rejects_violations_and_accepts_documented_wire_shapes() {
    let hz = Spec::load(Flavor::Hetzner).unwrap_or_else(|e| panic!("{e}"));
    let ptr = match hz.expected("get", "/ssh_keys/{id}", 200) {
        Ok(support::spec::Expected::Json(p)) => p,
        other => panic!("GET /ssh_keys/{{id}} 200: {other:?}"),
    };
    let good = json!({"ssh_key": {
        "id": 42, "name": "k", "fingerprint": KEY_A_FINGERPRINT, "public_key": KEY_A,
        "labels": {}, "created": "2026-11-29T12:00:00Z"}});
    assert_eq!(hz.validate(&ptr, &good), Vec::<String>::new());
    let mut extra = good.clone();
    extra["ssh_key"]["datacenter"] = json!("fsn1-dc14");
    assert!(
        !hz.validate(&ptr, &extra).is_empty(),
        "unknown field accepted"
    );
    let mut missing = good.clone();
    missing["ssh_key"]
        .as_object_mut()
        .map(|o| o.remove("fingerprint"));
    assert!(
        !hz.validate(&ptr, &missing).is_empty(),
        "missing field accepted"
    );
    let mut wrong = good.clone();
    wrong["ssh_key"]["id"] = json!("42");
    assert!(!hz.validate(&ptr, &wrong).is_empty(), "string id accepted");
    let mut bad_time = good.clone();
    bad_time["ssh_key"]["created"] = json!("yesterday");
    assert!(
        !hz.validate(&ptr, &bad_time).is_empty(),
        "bad date-time accepted"
    );
    assert!(hz.expected("get", "/ssh_keys/{id}", 302).is_err());
    assert!(matches!(
        hz.expected("delete", "/ssh_keys/{id}", 204),
        Ok(support::spec::Expected::Empty)
    ));

    let vu = Spec::load(Flavor::Vultr).unwrap_or_else(|e| panic!("{e}"));
    let ptr = match vu.expected("get", "/instances/{instance-id}", 200) {
        Ok(support::spec::Expected::Json(p)) => p,
        other => panic!("GET /instances/{{id}} 200: {other:?}"),
    };
    let wire = json!({"instance": {
        "id": "cb676a46-66fd-4dfb-b839-443f2e6c0b60", "os": "Ubuntu 24.04 LTS x64", "ram": 1024,
        "disk": 25, "main_ip": "192.0.2.123", "vcpu_count": 1, "region": "ewr",
        "plan": "vc2-1c-1gb", "date_created": "2026-11-29T12:00:00+00:00", "status": "active",
        "allowed_bandwidth": 1024, "netmask_v4": "255.255.254.0", "gateway_v4": "192.0.2.1",
        "power_status": "running", "server_status": "ok", "v6_network": "",
        "v6_main_ip": "", "v6_network_size": 0, "label": "", "internal_ip": "", "kvm": "",
        "hostname": "h", "os_id": 2284, "app_id": 0, "image_id": "", "snapshot_id": "",
        "firewall_group_id": "", "features": [], "tags": [], "user_scheme": "root",
        "vpc_only": false}});
    assert_eq!(vu.validate(&ptr, &wire), Vec::<String>::new());
    let mut stale = wire.clone();
    stale["instance"]["v6_networks"] = json!([]);
    assert!(
        !vu.validate(&ptr, &stale).is_empty(),
        "stale v6_networks accepted"
    );
    let mut fractional_plan = json!({"plans": [{"id": "vc2-1c-0.5gb-v6", "vcpu_count": 1,
        "ram": 512, "disk": 10, "disk_count": 1, "bandwidth": 512, "monthly_cost": 2.5,
        "hourly_cost": 0.003, "type": "vc2", "locations": ["ewr"], "disk_type": "SSD",
        "invoice_type": "monthly", "cpu_vendor": "Intel", "storage_type": "local_storage",
        "vcpu_type": "thread"}], "meta": {"total": 1, "links": {"next": "", "prev": ""}}});
    let plans = match vu.expected("get", "/plans", 200) {
        Ok(support::spec::Expected::Json(p)) => p,
        other => panic!("GET /plans 200: {other:?}"),
    };
    assert_eq!(vu.validate(&plans, &fractional_plan), Vec::<String>::new());
    fractional_plan["plans"][0]["monthly_cost"] = json!("2.5");
    assert!(!vu.validate(&plans, &fractional_plan).is_empty());
    // Undocumented 401 on GET /account is covered by the common responses; its body is
    // the error envelope.
    let env = match vu.expected("get", "/account", 401) {
        Ok(support::spec::Expected::Json(p)) => p,
        other => panic!("GET /account 401: {other:?}"),
    };
    assert!(
        vu.validate(&env, &json!({"error": "x", "status": 401}))
            .is_empty()
    );
    assert!(
        !vu.validate(&env, &json!({"error": {"code": "x"}}))
            .is_empty()
    );

    let reply = support::Reply {
        status: 200,
        headers: Default::default(),
        content_type: Some("text/plain".into()),
        bytes: br#"{"cores": 2.0, "price": 0.5}"#.to_vec(),
        json: Some(json!({"cores": 2.0, "price": 0.5})),
    };
    let f = support::transport_findings(&reply);
    assert_eq!(f.len(), 2, "{f:?}");
}

// ---------------------------------------------------------------------------------------
// Hetzner Cloud
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_catalog() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_catalog");

    let types = fx
        .call(api, "GET", "/server_types", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&types, "/server_types") >= 20, || {
        format!(
            "GET /server_types: {} types",
            list_len(&types, "/server_types")
        )
    });
    let cx23 = fx
        .call_query(
            api,
            "GET",
            "/server_types",
            &[],
            Some("name=cx23"),
            Body::None,
            200,
        )
        .await;
    fx.expect(list_len(&cx23, "/server_types") == 1, || {
        "GET /server_types?name=cx23 is not exactly one type".into()
    });
    let type_id = fx.need(id_at(&types, "/server_types/0/id"), "a server type id");
    fx.call(
        api,
        "GET",
        "/server_types/{id}",
        &[&type_id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/server_types/{id}",
        &["999999"],
        Body::None,
        404,
    )
    .await;

    let locations = fx
        .call(api, "GET", "/locations", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&locations, "/locations") == 6, || {
        format!(
            "GET /locations: {} locations",
            list_len(&locations, "/locations")
        )
    });
    fx.call_query(
        api,
        "GET",
        "/locations",
        &[],
        Some("name=fsn1"),
        Body::None,
        200,
    )
    .await;
    let loc_id = fx.need(id_at(&locations, "/locations/0/id"), "a location id");
    fx.call(api, "GET", "/locations/{id}", &[&loc_id], Body::None, 200)
        .await;
    fx.call(api, "GET", "/locations/{id}", &["999999"], Body::None, 404)
        .await;

    // Removed after 2026-10-01: 410 deprecated_api_endpoint by default.
    let dc = fx
        .call(api, "GET", "/datacenters", &[], Body::None, 410)
        .await;
    fx.expect(
        dc.pointer("/error/code") == Some(&json!("deprecated_api_endpoint")),
        || format!("GET /datacenters: code {:?}", dc.pointer("/error/code")),
    );

    fx.call(api, "GET", "/datacenters/{id}", &["1"], Body::None, 410)
        .await;
    fx.call(api, "GET", "/pricing", &[], Body::None, 200).await;

    let images = fx.call(api, "GET", "/images", &[], Body::None, 200).await;
    fx.call_query(
        api,
        "GET",
        "/images",
        &[],
        Some("type=system&architecture=x86&sort=id:asc&page=1&per_page=5"),
        Body::None,
        200,
    )
    .await;
    let image_id = fx.need(id_at(&images, "/images/0/id"), "an image id");
    fx.call(api, "GET", "/images/{id}", &[&image_id], Body::None, 200)
        .await;
    fx.call(api, "GET", "/images/{id}", &["999999"], Body::None, 404)
        .await;

    // Authentication: routing first, then the token.
    let anonymous = api.with_auth(Auth::None);
    fx.call(&anonymous, "GET", "/server_types", &[], Body::None, 401)
        .await;
    let wrong = api.with_auth(Auth::Bearer("not-a-token".into()));
    fx.call(&wrong, "GET", "/pricing", &[], Body::None, 401)
        .await;
    fx.call_unrouted(&anonymous, "GET", "/no_such_collection", 404)
        .await;
    fx.call_unrouted(api, "GET", "/servers/1/no_such_thing", 404)
        .await;
    fx.finish();
}

/// Creates an `off` server and returns its id and IPv4 address (if any).
async fn hetzner_server(
    fx: &mut Fidelity,
    w: &World,
    name: &str,
    extra: Value,
) -> (String, Option<String>) {
    let mut body = json!({
        "name": name, "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1",
        "labels": {"env": "test", "role": "web"},
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    let created = fx
        .call(&w.hetzner, "POST", "/servers", &[], json_body(body), 201)
        .await;
    let id = fx.need(id_at(&created, "/server/id"), "the created server's id");
    let ip = created
        .pointer("/server/public_net/ipv4/ip")
        .and_then(Value::as_str)
        .map(str::to_string);
    w.advance(120).await;
    (id, ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_servers() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_servers");

    let key = fx
        .call(
            api,
            "POST",
            "/ssh_keys",
            &[],
            json_body(json!({"name": "ops", "public_key": KEY_A})),
            201,
        )
        .await;
    let key_id = fx.need(id_at(&key, "/ssh_key/id"), "an SSH key id");
    let created = fx
        .call(
            api,
            "POST",
            "/servers",
            &[],
            json_body(json!({
                "name": "web-1", "server_type": "cx23", "image": "ubuntu-24.04",
                "location": "fsn1", "ssh_keys": [key_id.parse::<u64>().unwrap_or(0)],
                "labels": {"env": "test", "role": "web"},
                "public_net": {"enable_ipv4": true, "enable_ipv6": true},
            })),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/server/id"), "the created server's id");
    fx.expect(created.get("root_password") == Some(&Value::Null), || {
        "POST /servers with ssh_keys: root_password is not null".into()
    });
    fx.expect(list_len(&created, "/next_actions") == 1, || {
        "POST /servers: next_actions does not hold start_server".into()
    });
    let ipv4 = created
        .pointer("/server/public_net/ipv4/ip")
        .and_then(Value::as_str)
        .map(str::to_string);
    w.advance(120).await;

    // Without ssh_keys and start_after_create=false: a root password, no next action.
    let second = fx
        .call(
            api,
            "POST",
            "/servers",
            &[],
            json_body(json!({
                "name": "db-1", "server_type": 115, "image": "ubuntu-24.04", "location": "1",
                "start_after_create": false, "labels": {"env": "prod"},
            })),
            201,
        )
        .await;
    fx.expect(
        second.get("root_password").is_some_and(Value::is_string),
        || "POST /servers without ssh_keys: no root_password".into(),
    );
    fx.expect(list_len(&second, "/next_actions") == 0, || {
        "POST /servers start_after_create=false: next_actions not empty".into()
    });
    w.advance(120).await;

    let list = fx.call(api, "GET", "/servers", &[], Body::None, 200).await;
    fx.expect(list_len(&list, "/servers") == 2, || {
        format!(
            "GET /servers: {} servers, expected 2",
            list_len(&list, "/servers")
        )
    });
    for q in [
        "label_selector=env%3Dtest",
        "label_selector=env%20in%20(test,prod),!gone",
        "name=web-1",
        "status=running&status=off",
        "sort=id:desc&sort=name",
        "page=1&per_page=1",
    ] {
        fx.call_query(api, "GET", "/servers", &[], Some(q), Body::None, 200)
            .await;
    }
    // Pagination (EMULATOR-SPEC §1.2): two servers, one per page.
    let page = fx
        .call_query(
            api,
            "GET",
            "/servers",
            &[],
            Some("page=1&per_page=1"),
            Body::None,
            200,
        )
        .await;
    let want = json!({"page": 1, "per_page": 1, "previous_page": null, "next_page": 2,
        "last_page": 2, "total_entries": 2});
    fx.expect(page.pointer("/meta/pagination") == Some(&want), || {
        format!(
            "GET /servers?page=1&per_page=1: pagination {:?}, expected {want}",
            page.pointer("/meta/pagination")
        )
    });
    let link = fx.last_header("link").unwrap_or("").to_string();
    fx.expect(
        link.contains("rel=\"next\"")
            && link.contains("rel=\"last\"")
            && !link.contains("rel=\"prev\""),
        || format!("GET /servers?page=1&per_page=1: Link {link:?} lacks next/last or has prev"),
    );
    let last = fx
        .call_query(
            api,
            "GET",
            "/servers",
            &[],
            Some("page=2&per_page=1"),
            Body::None,
            200,
        )
        .await;
    fx.expect(
        last.pointer("/meta/pagination/next_page") == Some(&Value::Null)
            && last.pointer("/meta/pagination/previous_page") == Some(&json!(1)),
        || {
            format!(
                "page 2 of 2: pagination {:?}",
                last.pointer("/meta/pagination")
            )
        },
    );
    let selected = fx
        .call_query(
            api,
            "GET",
            "/servers",
            &[],
            Some("label_selector=env%3Dtest"),
            Body::None,
            200,
        )
        .await;
    fx.expect(
        list_len(&selected, "/servers") == 1 && list_has(&selected, "/servers", "id", &id),
        || "GET /servers?label_selector=env=test does not return exactly web-1".into(),
    );
    fx.call_either(
        api,
        "GET",
        "/servers",
        &[],
        Some("label_selector=%3D%3Dbroken%20in"),
        Body::None,
        &[400, 422],
    )
    .await;

    let one = fx
        .call(api, "GET", "/servers/{id}", &[&id], Body::None, 200)
        .await;
    fx.expect(
        one.pointer("/server/status") == Some(&json!("running")),
        || {
            format!(
                "server status after create: {:?}",
                one.pointer("/server/status")
            )
        },
    );
    fx.call(
        api,
        "PUT",
        "/servers/{id}",
        &[&id],
        json_body(json!({"name": "web-2", "labels": {"env": "test"}})),
        200,
    )
    .await;

    for action in [
        "poweroff", "poweron", "shutdown", "poweron", "reboot", "reset",
    ] {
        fx.call(
            api,
            "POST",
            &format!("/servers/{{id}}/actions/{action}"),
            &[&id],
            Body::None,
            201,
        )
        .await;
        w.advance(60).await;
    }
    let rebuilt = fx
        .call(
            api,
            "POST",
            "/servers/{id}/actions/rebuild",
            &[&id],
            json_body(json!({"image": "ubuntu-24.04"})),
            201,
        )
        .await;
    fx.expect(rebuilt.get("action").is_some(), || {
        "rebuild: no action".into()
    });
    w.advance(60).await;
    if let Some(ip) = &ipv4 {
        fx.call(
            api,
            "POST",
            "/servers/{id}/actions/change_dns_ptr",
            &[&id],
            json_body(json!({"ip": ip, "dns_ptr": "web.example.com"})),
            201,
        )
        .await;
        w.advance(60).await;
    } else {
        fx.note("POST /servers: public_net.ipv4 is null although enable_ipv4 was true".into());
    }
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/enable_rescue",
        &[&id],
        json_body(json!({"type": "linux64"})),
        201,
    )
    .await;
    w.advance(60).await;
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/disable_rescue",
        &[&id],
        Body::None,
        201,
    )
    .await;
    w.advance(60).await;
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/change_protection",
        &[&id],
        json_body(json!({"delete": true, "rebuild": true})),
        201,
    )
    .await;
    w.advance(60).await;
    let protected = fx
        .call(api, "DELETE", "/servers/{id}", &[&id], Body::None, 423)
        .await;
    fx.expect(
        protected.pointer("/error/code") == Some(&json!("protected")),
        || {
            format!(
                "DELETE protected server: code {:?}",
                protected.pointer("/error/code")
            )
        },
    );
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/change_protection",
        &[&id],
        json_body(json!({"delete": false, "rebuild": false})),
        201,
    )
    .await;
    w.advance(60).await;

    let actions = fx
        .call(api, "GET", "/servers/{id}/actions", &[&id], Body::None, 200)
        .await;
    let action_id = fx.need(id_at(&actions, "/actions/0/id"), "an action of the server");
    fx.call(
        api,
        "GET",
        "/servers/{id}/actions/{action_id}",
        &[&id, &action_id],
        Body::None,
        200,
    )
    .await;

    // Errors the operation table documents.
    let base =
        json!({"name": "x-1", "server_type": "cx23", "image": "ubuntu-24.04", "location": "fsn1"});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        json_body(b)
    };
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        with("server_type", json!("cx99")),
        422,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        with("image", json!("no-such-os")),
        422,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        with("location", json!("xyz1")),
        422,
    )
    .await;
    let unsupported = fx
        .call(
            api,
            "POST",
            "/servers",
            &[],
            json_body(json!({"name": "arm-1", "server_type": "cax11", "image": "ubuntu-24.04", "location": "ash"})),
            422,
        )
        .await;
    fx.expect(
        unsupported.pointer("/error/code") == Some(&json!("invalid_input")),
        || "cax11 in ash: not invalid_input".into(),
    );
    w.control(Flavor::Hetzner)
        .sold_out("cx33", "nbg1", true)
        .await;
    let sold = fx
        .call(
            api,
            "POST",
            "/servers",
            &[],
            json_body(json!({"name": "s-1", "server_type": "cx33", "image": "ubuntu-24.04", "location": "nbg1"})),
            412,
        )
        .await;
    fx.expect(
        sold.pointer("/error/code") == Some(&json!("resource_unavailable")),
        || "sold-out create: not resource_unavailable".into(),
    );
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        with("name", json!("db-1")),
        409,
    )
    .await;
    fx.call(api, "POST", "/servers", &[], not_json(), 400).await;
    // `datacenter` was removed from the request in July 2026 (EMULATOR-SPEC §1.7).
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        with("datacenter", json!("fsn1-dc14")),
        422,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/servers",
        &[],
        json_body(json!({"server_type": "cx23"})),
        422,
    )
    .await;
    fx.call(api, "GET", "/servers/{id}", &["999999999"], Body::None, 404)
        .await;
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/poweron",
        &["999999999"],
        Body::None,
        404,
    )
    .await;
    fx.call(
        &api.with_auth(Auth::None),
        "GET",
        "/servers",
        &[],
        Body::None,
        401,
    )
    .await;

    let deleted = fx
        .call(api, "DELETE", "/servers/{id}", &[&id], Body::None, 200)
        .await;
    fx.expect(
        deleted.pointer("/action/command") == Some(&json!("delete_server")),
        || "DELETE /servers/{id}: action is not delete_server".into(),
    );
    w.advance(120).await;
    fx.call(api, "GET", "/servers/{id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_actions() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_actions");
    let (id, _) = hetzner_server(&mut fx, &w, "act-1", json!({})).await;
    let off = fx
        .call(
            api,
            "POST",
            "/servers/{id}/actions/poweroff",
            &[&id],
            Body::None,
            201,
        )
        .await;
    let action_id = fx.need(id_at(&off, "/action/id"), "the poweroff action id");
    w.advance(60).await;

    let one = fx
        .call(api, "GET", "/actions/{id}", &[&action_id], Body::None, 200)
        .await;
    fx.expect(
        one.pointer("/action/status") == Some(&json!("success")),
        || {
            format!(
                "poweroff action status: {:?}",
                one.pointer("/action/status")
            )
        },
    );
    let by_id = fx
        .call_query(
            api,
            "GET",
            "/actions",
            &[],
            Some(&format!("id={action_id}&sort=status&sort=id")),
            Body::None,
            200,
        )
        .await;
    fx.expect(list_has(&by_id, "/actions", "id", &action_id), || {
        "GET /actions?id=…: the action is missing".into()
    });
    // Listing every action without id was removed in 2025.
    fx.call_either(api, "GET", "/actions", &[], None, Body::None, &[400, 422])
        .await;
    fx.call(
        api,
        "GET",
        "/actions/{id}",
        &["999999999999"],
        Body::None,
        404,
    )
    .await;
    fx.call(api, "GET", "/servers/actions", &[], Body::None, 200)
        .await;
    fx.call(
        api,
        "GET",
        "/servers/actions/{id}",
        &[&action_id],
        Body::None,
        200,
    )
    .await;

    // A failing action.
    w.control(Flavor::Hetzner).fail_next_actions(1).await;
    let failing = fx
        .call(
            api,
            "POST",
            "/servers/{id}/actions/poweron",
            &[&id],
            Body::None,
            201,
        )
        .await;
    let failing_id = fx.need(id_at(&failing, "/action/id"), "the poweron action id");
    w.advance(60).await;
    let failed = fx
        .call(api, "GET", "/actions/{id}", &[&failing_id], Body::None, 200)
        .await;
    fx.expect(
        failed.pointer("/action/status") == Some(&json!("error")),
        || {
            format!(
                "failed action status: {:?}",
                failed.pointer("/action/status")
            )
        },
    );
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_ssh_keys() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_ssh_keys");
    let created = fx
        .call(
            api,
            "POST",
            "/ssh_keys",
            &[],
            json_body(json!({"name": "ops", "public_key": KEY_A, "labels": {"team": "infra"}})),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/ssh_key/id"), "the SSH key id");
    fx.expect(
        created.pointer("/ssh_key/fingerprint") == Some(&json!(KEY_A_FINGERPRINT)),
        || {
            format!(
                "fingerprint {:?}, expected {KEY_A_FINGERPRINT}",
                created.pointer("/ssh_key/fingerprint")
            )
        },
    );
    let list = fx.call(api, "GET", "/ssh_keys", &[], Body::None, 200).await;
    fx.expect(list_has(&list, "/ssh_keys", "id", &id), || {
        "GET /ssh_keys misses the key".into()
    });
    for q in [
        "name=ops",
        &format!("fingerprint={KEY_A_FINGERPRINT}"),
        "label_selector=team%3Dinfra",
        "sort=name:desc",
    ] {
        let found = fx
            .call_query(api, "GET", "/ssh_keys", &[], Some(q), Body::None, 200)
            .await;
        fx.expect(list_len(&found, "/ssh_keys") == 1, || {
            format!("GET /ssh_keys?{q}: not exactly one key")
        });
    }
    fx.call(api, "GET", "/ssh_keys/{id}", &[&id], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/ssh_keys/{id}",
        &[&id],
        json_body(json!({"name": "ops-2", "labels": {"team": "core"}})),
        200,
    )
    .await;
    let dup = fx
        .call(
            api,
            "POST",
            "/ssh_keys",
            &[],
            json_body(json!({"name": "other", "public_key": KEY_A})),
            409,
        )
        .await;
    fx.expect(
        dup.pointer("/error/code") == Some(&json!("uniqueness_error")),
        || "duplicate fingerprint: not uniqueness_error".into(),
    );
    fx.call(
        api,
        "POST",
        "/ssh_keys",
        &[],
        json_body(json!({"name": "ops-2", "public_key": KEY_B})),
        409,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/ssh_keys",
        &[],
        json_body(json!({"name": "bad", "public_key": "ssh-ed25519 not-base64!"})),
        422,
    )
    .await;
    let bad_label = fx
        .call(
            api,
            "POST",
            "/ssh_keys",
            &[],
            json_body(json!({"name": "lbl", "public_key": KEY_B, "labels": {"-bad": "x"}})),
            422,
        )
        .await;
    fx.expect(
        bad_label.pointer("/error/details/fields/0/name") == Some(&json!("labels")),
        || "invalid label: details.fields[0].name is not labels".into(),
    );
    fx.call(api, "POST", "/ssh_keys", &[], not_json(), 400)
        .await;
    fx.call(api, "DELETE", "/ssh_keys/{id}", &[&id], Body::None, 204)
        .await;
    fx.call(api, "GET", "/ssh_keys/{id}", &[&id], Body::None, 404)
        .await;
    fx.call(api, "DELETE", "/ssh_keys/{id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_networks() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_networks");
    let created = fx
        .call(
            api,
            "POST",
            "/networks",
            &[],
            json_body(json!({
                "name": "mesh", "ip_range": "10.0.0.0/16", "labels": {"env": "test"},
                "subnets": [{"type": "cloud", "ip_range": "10.0.1.0/24", "network_zone": "eu-central"}],
                "routes": [{"destination": "10.100.1.0/24", "gateway": "10.0.1.1"}],
            })),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/network/id"), "the network id");
    fx.call(api, "GET", "/networks", &[], Body::None, 200).await;
    fx.call_query(
        api,
        "GET",
        "/networks",
        &[],
        Some("label_selector=env&name=mesh"),
        Body::None,
        200,
    )
    .await;
    fx.call(api, "GET", "/networks/{id}", &[&id], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/networks/{id}",
        &[&id],
        json_body(json!({"name": "mesh-2", "labels": {"env": "prod"}})),
        200,
    )
    .await;
    let steps: [(&str, Value); 6] = [
        (
            "add_subnet",
            json!({"type": "cloud", "ip_range": "10.0.2.0/24", "network_zone": "eu-central"}),
        ),
        (
            "add_route",
            json!({"destination": "10.100.2.0/24", "gateway": "10.0.1.1"}),
        ),
        (
            "delete_route",
            json!({"destination": "10.100.2.0/24", "gateway": "10.0.1.1"}),
        ),
        ("delete_subnet", json!({"ip_range": "10.0.2.0/24"})),
        ("change_ip_range", json!({"ip_range": "10.0.0.0/15"})),
        ("change_protection", json!({"delete": false})),
    ];
    for (action, body) in steps {
        fx.call(
            api,
            "POST",
            &format!("/networks/{{id}}/actions/{action}"),
            &[&id],
            json_body(body),
            201,
        )
        .await;
        w.advance(30).await;
    }
    fx.call(
        api,
        "GET",
        "/networks/{id}/actions",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(api, "GET", "/networks/actions", &[], Body::None, 200)
        .await;

    let (server, _) = hetzner_server(&mut fx, &w, "net-1", json!({})).await;
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/attach_to_network",
        &[&server],
        json_body(json!({"network": id.parse::<u64>().unwrap_or(0)})),
        201,
    )
    .await;
    w.advance(30).await;
    let attached = fx
        .call(api, "GET", "/servers/{id}", &[&server], Body::None, 200)
        .await;
    fx.expect(list_len(&attached, "/server/private_net") == 1, || {
        "attach_to_network: server.private_net is not one entry".into()
    });
    fx.call(
        api,
        "POST",
        "/servers/{id}/actions/detach_from_network",
        &[&server],
        json_body(json!({"network": id.parse::<u64>().unwrap_or(0)})),
        201,
    )
    .await;
    w.advance(30).await;

    fx.call(
        api,
        "POST",
        "/networks",
        &[],
        json_body(json!({"name": "bad", "ip_range": "10.0.0.0/33"})),
        422,
    )
    .await;
    fx.call(api, "POST", "/networks", &[], not_json(), 400)
        .await;
    fx.call(api, "DELETE", "/networks/{id}", &[&id], Body::None, 204)
        .await;
    fx.call(api, "GET", "/networks/{id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_ips() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_ips");

    // Primary IPs.
    let created = fx
        .call(
            api,
            "POST",
            "/primary_ips",
            &[],
            json_body(json!({
                "name": "ip-1", "type": "ipv4", "location": "fsn1", "assignee_type": "server",
                "auto_delete": false, "labels": {"env": "test"},
            })),
            201,
        )
        .await;
    let pip = fx.need(id_at(&created, "/primary_ip/id"), "the primary IP id");
    let pip_addr = created
        .pointer("/primary_ip/ip")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    fx.expect(
        created.pointer("/primary_ip/assignee_type") == Some(&json!("unassigned")),
        || "unassigned primary IP: assignee_type is not \"unassigned\"".into(),
    );
    fx.call(api, "GET", "/primary_ips", &[], Body::None, 200)
        .await;
    fx.call_query(
        api,
        "GET",
        "/primary_ips",
        &[],
        Some(&format!("ip={pip_addr}&label_selector=env%3Dtest")),
        Body::None,
        200,
    )
    .await;
    fx.call(api, "GET", "/primary_ips/{id}", &[&pip], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/primary_ips/{id}",
        &[&pip],
        json_body(json!({"name": "ip-2", "labels": {}, "auto_delete": false})),
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/primary_ips/{id}/actions/change_dns_ptr",
        &[&pip],
        json_body(json!({"ip": pip_addr, "dns_ptr": "mail.example.com"})),
        201,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/primary_ips/{id}/actions/change_protection",
        &[&pip],
        json_body(json!({"delete": false})),
        201,
    )
    .await;
    w.advance(30).await;

    let (server, _) = hetzner_server(
        &mut fx,
        &w,
        "ip-host",
        json!({"start_after_create": false, "public_net": {"enable_ipv4": false, "enable_ipv6": true}}),
    )
    .await;
    let server_num = server.parse::<u64>().unwrap_or(0);
    fx.call(
        api,
        "POST",
        "/primary_ips/{id}/actions/assign",
        &[&pip],
        json_body(json!({"assignee_type": "server", "assignee_id": server_num})),
        201,
    )
    .await;
    w.advance(30).await;
    let busy = fx
        .call(api, "DELETE", "/primary_ips/{id}", &[&pip], Body::None, 422)
        .await;
    fx.expect(
        busy.pointer("/error/code") == Some(&json!("must_be_unassigned")),
        || "deleting an assigned primary IP: not must_be_unassigned".into(),
    );
    fx.call(
        api,
        "POST",
        "/primary_ips/{id}/actions/unassign",
        &[&pip],
        Body::None,
        201,
    )
    .await;
    w.advance(30).await;
    fx.call(
        api,
        "GET",
        "/primary_ips/{id}/actions",
        &[&pip],
        Body::None,
        200,
    )
    .await;
    fx.call(api, "GET", "/primary_ips/actions", &[], Body::None, 200)
        .await;
    fx.call(api, "DELETE", "/primary_ips/{id}", &[&pip], Body::None, 204)
        .await;
    fx.call(api, "GET", "/primary_ips/{id}", &[&pip], Body::None, 404)
        .await;
    fx.call(
        api,
        "POST",
        "/primary_ips",
        &[],
        json_body(
            json!({"name": "bad", "type": "ipv5", "location": "fsn1", "assignee_type": "server"}),
        ),
        422,
    )
    .await;

    // Floating IPs.
    let fip = fx
        .call(
            api,
            "POST",
            "/floating_ips",
            &[],
            json_body(json!({
                "type": "ipv4", "home_location": "fsn1", "name": "vip",
                "description": "entry", "labels": {"env": "test"},
            })),
            201,
        )
        .await;
    let fid = fx.need(id_at(&fip, "/floating_ip/id"), "the floating IP id");
    let faddr = fip
        .pointer("/floating_ip/ip")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    fx.call(api, "GET", "/floating_ips", &[], Body::None, 200)
        .await;
    fx.call(api, "GET", "/floating_ips/{id}", &[&fid], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/floating_ips/{id}",
        &[&fid],
        json_body(json!({"description": "front", "name": "vip-2", "labels": {}})),
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/floating_ips/{id}/actions/assign",
        &[&fid],
        json_body(json!({"server": server_num})),
        201,
    )
    .await;
    w.advance(30).await;
    fx.call(
        api,
        "POST",
        "/floating_ips/{id}/actions/change_dns_ptr",
        &[&fid],
        json_body(json!({"ip": faddr, "dns_ptr": "vip.example.com"})),
        201,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/floating_ips/{id}/actions/change_protection",
        &[&fid],
        json_body(json!({"delete": false})),
        201,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/floating_ips/{id}/actions/unassign",
        &[&fid],
        Body::None,
        201,
    )
    .await;
    w.advance(30).await;
    fx.call(api, "GET", "/floating_ips/actions", &[], Body::None, 200)
        .await;
    fx.call(
        api,
        "GET",
        "/floating_ips/{id}/actions",
        &[&fid],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "DELETE",
        "/floating_ips/{id}",
        &[&fid],
        Body::None,
        204,
    )
    .await;
    fx.call(api, "GET", "/floating_ips/{id}", &[&fid], Body::None, 404)
        .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzner_volumes() {
    let w = support::start().await;
    let api = &w.hetzner;
    let mut fx = Fidelity::new("hetzner_volumes");
    let (server, _) = hetzner_server(&mut fx, &w, "vol-host", json!({})).await;
    let server_num = server.parse::<u64>().unwrap_or(0);
    let created = fx
        .call(
            api,
            "POST",
            "/volumes",
            &[],
            json_body(json!({
                "name": "data", "size": 10, "location": "fsn1", "format": "ext4",
                "automount": false, "labels": {"env": "test"},
            })),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/volume/id"), "the volume id");
    w.advance(30).await;
    fx.call(api, "GET", "/volumes", &[], Body::None, 200).await;
    fx.call_query(
        api,
        "GET",
        "/volumes",
        &[],
        Some("label_selector=env%3Dtest&name=data"),
        Body::None,
        200,
    )
    .await;
    fx.call(api, "GET", "/volumes/{id}", &[&id], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/volumes/{id}",
        &[&id],
        json_body(json!({"name": "data-2", "labels": {}})),
        200,
    )
    .await;
    let steps: [(&str, Value); 4] = [
        ("attach", json!({"server": server_num, "automount": false})),
        ("resize", json!({"size": 20})),
        ("detach", json!({})),
        ("change_protection", json!({"delete": false})),
    ];
    for (action, body) in steps {
        fx.call(
            api,
            "POST",
            &format!("/volumes/{{id}}/actions/{action}"),
            &[&id],
            json_body(body),
            201,
        )
        .await;
        w.advance(30).await;
    }
    fx.call(api, "GET", "/volumes/{id}/actions", &[&id], Body::None, 200)
        .await;
    fx.call(api, "GET", "/volumes/actions", &[], Body::None, 200)
        .await;
    fx.call(
        api,
        "POST",
        "/volumes",
        &[],
        json_body(json!({"name": "tiny", "size": 1, "location": "fsn1"})),
        422,
    )
    .await;
    fx.call(api, "DELETE", "/volumes/{id}", &[&id], Body::None, 204)
        .await;
    fx.call(api, "GET", "/volumes/{id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

// ---------------------------------------------------------------------------------------
// Vultr
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_catalog() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_catalog");
    let anonymous = api.with_auth(Auth::None);
    // The catalogue answers without a key.
    let plans = fx
        .call(&anonymous, "GET", "/plans", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&plans, "/plans") >= 60, || {
        format!("GET /plans: {} plans", list_len(&plans, "/plans"))
    });
    for q in ["type=vc2", "type=vhp&per_page=5", "per_page=10"] {
        fx.call_query(api, "GET", "/plans", &[], Some(q), Body::None, 200)
            .await;
    }
    let page = fx
        .call_query(
            api,
            "GET",
            "/plans",
            &[],
            Some("per_page=10"),
            Body::None,
            200,
        )
        .await;
    let cursor = page
        .pointer("/meta/links/next")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    fx.expect(!cursor.is_empty(), || {
        "GET /plans?per_page=10: no next cursor".into()
    });
    if !cursor.is_empty() {
        fx.call_query(
            api,
            "GET",
            "/plans",
            &[],
            Some(&format!("per_page=10&cursor={cursor}")),
            Body::None,
            200,
        )
        .await;
    }
    // Cursor pagination (EMULATOR-SPEC §2.2): walking `links.next` visits every plan once
    // and the last page says `next: ""`.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = String::new();
    for _ in 0..20 {
        let q = if cursor.is_empty() {
            "per_page=25".to_string()
        } else {
            format!("per_page=25&cursor={cursor}")
        };
        let page = fx
            .call_query(api, "GET", "/plans", &[], Some(&q), Body::None, 200)
            .await;
        for p in page
            .get("plans")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = p.get("id").and_then(Value::as_str) {
                fx.expect(seen.insert(id.to_string()), || {
                    format!("plan {id} listed twice")
                });
            }
        }
        cursor = page
            .pointer("/meta/links/next")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if cursor.is_empty() {
            break;
        }
    }
    let total = plans.pointer("/meta/total").and_then(Value::as_u64);
    fx.expect(
        seen.len() == list_len(&plans, "/plans") && total == Some(seen.len() as u64),
        || {
            format!(
                "walking /plans by cursor saw {} plans; one page of all has {}, meta.total {total:?}",
                seen.len(),
                list_len(&plans, "/plans")
            )
        },
    );
    let regions = fx
        .call(&anonymous, "GET", "/regions", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&regions, "/regions") >= 30, || {
        format!("GET /regions: {} regions", list_len(&regions, "/regions"))
    });
    let avail = fx
        .call(
            api,
            "GET",
            "/regions/{region-id}/availability",
            &["ewr"],
            Body::None,
            200,
        )
        .await;
    fx.expect(list_len(&avail, "/available_plans") > 0, || {
        "GET /regions/ewr/availability: no plans".into()
    });
    fx.call_query(
        api,
        "GET",
        "/regions/{region-id}/availability",
        &["ewr"],
        Some("type=vc2"),
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/regions/{region-id}/availability",
        &["nowhere"],
        Body::None,
        404,
    )
    .await;
    fx.call(&anonymous, "GET", "/os", &[], Body::None, 200)
        .await;
    fx.call(api, "GET", "/account", &[], Body::None, 200).await;
    fx.call(&anonymous, "GET", "/account", &[], Body::None, 401)
        .await;
    fx.call(
        &api.with_auth(Auth::Bearer("wrong".into())),
        "GET",
        "/instances",
        &[],
        Body::None,
        401,
    )
    .await;
    fx.call_unrouted(api, "GET", "/no-such-thing", 404).await;
    fx.finish();
}

async fn vultr_instance(fx: &mut Fidelity, w: &World, label: &str, region: &str) -> String {
    let created = fx
        .call(
            &w.vultr,
            "POST",
            "/instances",
            &[],
            json_body(json!({
                "region": region, "plan": "vc2-1c-1gb", "os_id": 2284, "label": label,
                "hostname": label, "tags": ["orc", "test"], "enable_ipv6": true,
                "user_data": "I2Nsb3VkLWNvbmZpZwo=", "backups": "disabled",
            })),
            202,
        )
        .await;
    let id = fx.need(id_at(&created, "/instance/id"), "the created instance id");
    w.advance(600).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_instances() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_instances");
    let created = fx
        .call(
            api,
            "POST",
            "/instances",
            &[],
            json_body(json!({
                "region": "ewr", "plan": "vc2-1c-1gb", "os_id": 2284, "label": "web-1",
                "hostname": "web-1", "tags": ["orc", "web"], "enable_ipv6": true,
                "user_data": "I2Nsb3VkLWNvbmZpZwo=",
            })),
            202,
        )
        .await;
    let id = fx.need(id_at(&created, "/instance/id"), "the created instance id");
    fx.expect(
        created
            .pointer("/instance/default_password")
            .is_some_and(Value::is_string),
        || "POST /instances: no default_password".into(),
    );
    w.advance(600).await;
    let second = vultr_instance(&mut fx, &w, "db-1", "sea").await;

    let list = fx
        .call(api, "GET", "/instances", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&list, "/instances") == 2, || {
        format!(
            "GET /instances: {} instances",
            list_len(&list, "/instances")
        )
    });
    for q in [
        "tag=web",
        "label=web-1",
        "region=sea",
        "per_page=1",
        "main_ip=192.0.2.1",
    ] {
        fx.call_query(api, "GET", "/instances", &[], Some(q), Body::None, 200)
            .await;
    }
    let tagged = fx
        .call_query(
            api,
            "GET",
            "/instances",
            &[],
            Some("tag=web"),
            Body::None,
            200,
        )
        .await;
    fx.expect(
        list_len(&tagged, "/instances") == 1 && list_has(&tagged, "/instances", "id", &id),
        || "GET /instances?tag=web is not exactly web-1".into(),
    );
    let one = fx
        .call(
            api,
            "GET",
            "/instances/{instance-id}",
            &[&id],
            Body::None,
            200,
        )
        .await;
    fx.expect(
        one.pointer("/instance/status") == Some(&json!("active")),
        || {
            format!(
                "status after install: {:?}",
                one.pointer("/instance/status")
            )
        },
    );
    let main_ip = one
        .pointer("/instance/main_ip")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let v6 = one
        .pointer("/instance/v6_main_ip")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    fx.call(
        api,
        "PATCH",
        "/instances/{instance-id}",
        &[&id],
        json_body(json!({"label": "web-2", "tags": ["orc"]})),
        202,
    )
    .await;
    for action in ["halt", "start", "reboot"] {
        fx.call(
            api,
            "POST",
            &format!("/instances/{{instance-id}}/{action}"),
            &[&id],
            Body::None,
            204,
        )
        .await;
    }
    for bulk in ["halt", "start", "reboot"] {
        fx.call(
            api,
            "POST",
            &format!("/instances/{bulk}"),
            &[],
            json_body(json!({"instance_ids": [id, second]})),
            204,
        )
        .await;
    }
    fx.call(
        api,
        "GET",
        "/instances/{instance-id}/user-data",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/instances/{instance-id}/ipv4",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/instances/{instance-id}/ipv6",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/instances/{instance-id}/ipv4/reverse",
        &[&id],
        json_body(json!({"ip": main_ip, "reverse": "web.example.com"})),
        204,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/instances/{instance-id}/ipv4/reverse/default",
        &[&id],
        json_body(json!({"ip": main_ip})),
        204,
    )
    .await;
    if v6.is_empty() {
        fx.note("instance created with enable_ipv6: v6_main_ip is empty".into());
    } else {
        fx.call(
            api,
            "POST",
            "/instances/{instance-id}/ipv6/reverse",
            &[&id],
            json_body(json!({"ip": v6, "reverse": "web6.example.com"})),
            204,
        )
        .await;
        let rev = fx
            .call(
                api,
                "GET",
                "/instances/{instance-id}/ipv6/reverse",
                &[&id],
                Body::None,
                200,
            )
            .await;
        fx.expect(list_len(&rev, "/reverse_ipv6s") == 1, || {
            "GET …/ipv6/reverse: not exactly the record just set".into()
        });
        fx.call(
            api,
            "DELETE",
            "/instances/{instance-id}/ipv6/reverse/{ipv6}",
            &[&id, &v6],
            Body::None,
            204,
        )
        .await;
    }
    fx.call(
        api,
        "POST",
        "/instances/{instance-id}/reinstall",
        &[&id],
        json_body(json!({"hostname": "web-2"})),
        202,
    )
    .await;
    w.advance(600).await;

    // Errors.
    let base = json!({"region": "ewr", "plan": "vc2-1c-1gb", "os_id": 2284});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        json_body(b)
    };
    let bad_plan = fx
        .call(
            api,
            "POST",
            "/instances",
            &[],
            with("plan", json!("vbm-4c-32gb")),
            400,
        )
        .await;
    fx.expect(
        bad_plan
            .get("error")
            .and_then(Value::as_str)
            .is_some_and(|m| m.contains("Invalid plan")),
        || format!("bad plan message: {:?}", bad_plan.get("error")),
    );
    w.control(Flavor::Vultr)
        .sold_out("vc2-1c-1gb", "ams", true)
        .await;
    let sold = fx
        .call(
            api,
            "POST",
            "/instances",
            &[],
            with("region", json!("ams")),
            400,
        )
        .await;
    fx.expect(
        sold.get("error")
            .and_then(Value::as_str)
            .is_some_and(|m| m.to_lowercase().contains("not available")),
        || format!("sold-out message: {:?}", sold.get("error")),
    );
    fx.call(
        api,
        "POST",
        "/instances",
        &[],
        with("region", json!("xx")),
        400,
    )
    .await;
    fx.call(api, "POST", "/instances", &[], not_json(), 400)
        .await;
    let missing = fx
        .call(
            api,
            "GET",
            "/instances/{instance-id}",
            &["cb676a46-66fd-4dfb-b839-443f2e6c0b60"],
            Body::None,
            404,
        )
        .await;
    fx.expect(
        missing
            .get("error")
            .and_then(Value::as_str)
            .is_some_and(|m| m.contains("instance not found")),
        || format!("unknown instance message: {:?}", missing.get("error")),
    );
    fx.call(
        api,
        "DELETE",
        "/instances/{instance-id}",
        &[&id],
        Body::None,
        204,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/instances/{instance-id}",
        &[&id],
        Body::None,
        404,
    )
    .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_reserved_ips() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_reserved_ips");
    let instance = vultr_instance(&mut fx, &w, "rip-host", "ewr").await;
    let created = fx
        .call(
            api,
            "POST",
            "/reserved-ips",
            &[],
            json_body(json!({"region": "ewr", "ip_type": "v4", "label": "vip"})),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/reserved_ip/id"), "the reserved IP id");
    fx.call(
        api,
        "POST",
        "/reserved-ips",
        &[],
        json_body(json!({"region": "ewr", "ip_type": "v6", "label": "vip6"})),
        201,
    )
    .await;
    let list = fx
        .call(api, "GET", "/reserved-ips", &[], Body::None, 200)
        .await;
    fx.expect(list_len(&list, "/reserved_ips") == 2, || {
        "GET /reserved-ips: not the two created".into()
    });
    fx.call(
        api,
        "GET",
        "/reserved-ips/{reserved-ip}",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "PATCH",
        "/reserved-ips/{reserved-ip}",
        &[&id],
        json_body(json!({"label": "vip-2"})),
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/reserved-ips/{reserved-ip}/attach",
        &[&id],
        json_body(json!({"instance_id": instance})),
        204,
    )
    .await;
    let attached = fx
        .call(
            api,
            "GET",
            "/reserved-ips/{reserved-ip}",
            &[&id],
            Body::None,
            200,
        )
        .await;
    fx.expect(
        attached.pointer("/reserved_ip/instance_id") == Some(&json!(instance)),
        || "attach: reserved_ip.instance_id is not the instance".into(),
    );
    fx.call(
        api,
        "POST",
        "/reserved-ips/{reserved-ip}/detach",
        &[&id],
        json_body(json!({"instance_id": instance})),
        204,
    )
    .await;
    let one = fx
        .call(
            api,
            "GET",
            "/instances/{instance-id}",
            &[&instance],
            Body::None,
            200,
        )
        .await;
    let main_ip = one
        .pointer("/instance/main_ip")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    fx.call(
        api,
        "POST",
        "/reserved-ips/convert",
        &[],
        json_body(json!({"ip_address": main_ip, "label": "converted"})),
        201,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/reserved-ips",
        &[],
        json_body(json!({"region": "ewr", "ip_type": "v5"})),
        400,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/reserved-ips/{reserved-ip}",
        &["00000000-0000-4000-8000-000000000000"],
        Body::None,
        404,
    )
    .await;
    fx.call(
        api,
        "DELETE",
        "/reserved-ips/{reserved-ip}",
        &[&id],
        Body::None,
        204,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/reserved-ips/{reserved-ip}",
        &[&id],
        Body::None,
        404,
    )
    .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_vpcs() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_vpcs");
    let created = fx
        .call(
            api,
            "POST",
            "/vpcs",
            &[],
            json_body(json!({
                "region": "ewr", "description": "mesh", "v4_subnet": "10.9.0.0",
                "v4_subnet_mask": 24,
            })),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/vpc/id"), "the VPC id");
    fx.call(api, "GET", "/vpcs", &[], Body::None, 200).await;
    fx.call(api, "GET", "/vpcs/{vpc-id}", &[&id], Body::None, 200)
        .await;
    fx.call(
        api,
        "PUT",
        "/vpcs/{vpc-id}",
        &[&id],
        json_body(json!({"description": "mesh-2"})),
        204,
    )
    .await;
    let instance = vultr_instance(&mut fx, &w, "vpc-host", "ewr").await;
    fx.call(
        api,
        "POST",
        "/instances/{instance-id}/vpcs/attach",
        &[&instance],
        json_body(json!({"vpc_id": id})),
        204,
    )
    .await;
    let attached = fx
        .call(
            api,
            "GET",
            "/instances/{instance-id}/vpcs",
            &[&instance],
            Body::None,
            200,
        )
        .await;
    fx.expect(list_has(&attached, "/vpcs", "id", &id), || {
        "GET /instances/{id}/vpcs: the attached VPC is missing".into()
    });
    let refused = fx
        .call(api, "DELETE", "/vpcs/{vpc-id}", &[&id], Body::None, 400)
        .await;
    fx.expect(
        refused
            .get("error")
            .and_then(Value::as_str)
            .is_some_and(|m| m.contains("attached to this VPC network")),
        || format!("deleting an attached VPC: {:?}", refused.get("error")),
    );
    fx.call(
        api,
        "POST",
        "/instances/{instance-id}/vpcs/detach",
        &[&instance],
        json_body(json!({"vpc_id": id})),
        204,
    )
    .await;
    // VPC 2.0 is no longer supported.
    fx.call(api, "GET", "/vpc2", &[], Body::None, 400).await;
    fx.call(
        api,
        "POST",
        "/vpcs",
        &[],
        json_body(json!({"region": "nowhere"})),
        400,
    )
    .await;
    fx.call(api, "DELETE", "/vpcs/{vpc-id}", &[&id], Body::None, 204)
        .await;
    fx.call(api, "GET", "/vpcs/{vpc-id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_ssh_keys() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_ssh_keys");
    let created = fx
        .call(
            api,
            "POST",
            "/ssh-keys",
            &[],
            json_body(json!({"name": "ops", "ssh_key": KEY_A})),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/ssh_key/id"), "the SSH key id");
    let list = fx.call(api, "GET", "/ssh-keys", &[], Body::None, 200).await;
    fx.expect(list_has(&list, "/ssh_keys", "id", &id), || {
        "GET /ssh-keys misses the key".into()
    });
    fx.call(
        api,
        "GET",
        "/ssh-keys/{ssh-key-id}",
        &[&id],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "PATCH",
        "/ssh-keys/{ssh-key-id}",
        &[&id],
        json_body(json!({"name": "ops-2", "ssh_key": KEY_B})),
        204,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/ssh-keys",
        &[],
        json_body(json!({"name": "no-key"})),
        400,
    )
    .await;
    fx.call(api, "POST", "/ssh-keys", &[], not_json(), 400)
        .await;
    fx.call(
        api,
        "DELETE",
        "/ssh-keys/{ssh-key-id}",
        &[&id],
        Body::None,
        204,
    )
    .await;
    fx.call(
        api,
        "GET",
        "/ssh-keys/{ssh-key-id}",
        &[&id],
        Body::None,
        404,
    )
    .await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vultr_blocks() {
    let w = support::start().await;
    let api = &w.vultr;
    let mut fx = Fidelity::new("vultr_blocks");
    let created = fx
        .call(
            api,
            "POST",
            "/blocks",
            &[],
            json_body(json!({"region": "ewr", "size_gb": 40, "label": "data"})),
            202,
        )
        .await;
    let id = fx.need(id_at(&created, "/block/id"), "the block id");
    w.advance(60).await;
    fx.call(api, "GET", "/blocks", &[], Body::None, 200).await;
    fx.call(api, "GET", "/blocks/{block-id}", &[&id], Body::None, 200)
        .await;
    fx.call(
        api,
        "PATCH",
        "/blocks/{block-id}",
        &[&id],
        json_body(json!({"label": "data-2", "size_gb": 50})),
        204,
    )
    .await;
    let instance = vultr_instance(&mut fx, &w, "blk-host", "ewr").await;
    fx.call(
        api,
        "POST",
        "/blocks/{block-id}/attach",
        &[&id],
        json_body(json!({"instance_id": instance, "live": true})),
        204,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/blocks/{block-id}/detach",
        &[&id],
        json_body(json!({"live": true})),
        204,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/blocks",
        &[],
        json_body(json!({"region": "ewr", "size_gb": 0})),
        400,
    )
    .await;
    fx.call(api, "DELETE", "/blocks/{block-id}", &[&id], Body::None, 204)
        .await;
    fx.call(api, "GET", "/blocks/{block-id}", &[&id], Body::None, 404)
        .await;
    fx.finish();
}

// ---------------------------------------------------------------------------------------
// Hetzner Robot (shapes from EMULATOR-SPEC §3 and the seed fixtures)
// ---------------------------------------------------------------------------------------

fn form(pairs: &[(&str, &str)]) -> Body {
    Body::Form(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_servers_and_resets() {
    let w = support::start().await;
    let api = &w.robot;
    let mut fx = Fidelity::new("robot_servers_and_resets");
    let list = fx.call(api, "GET", "/server", &[], Body::None, 200).await;
    let servers = list.as_array().map_or(0, Vec::len);
    fx.expect(servers == 3, || {
        format!("GET /server: {servers} servers, seed has 3")
    });
    let n = fx.need(id_at(&list, "/0/server/server_number"), "a server number");
    fx.call(
        api,
        "GET",
        "/server/{server-number}",
        &[&n],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/server/{server-number}",
        &[&n],
        form(&[("server_name", "db-renamed")]),
        200,
    )
    .await;
    let missing = fx
        .call(
            api,
            "GET",
            "/server/{server-number}",
            &["1"],
            Body::None,
            404,
        )
        .await;
    fx.expect(
        missing.pointer("/error/code") == Some(&json!("SERVER_NOT_FOUND")),
        || "unknown server: code is not SERVER_NOT_FOUND".into(),
    );
    fx.call(api, "GET", "/reset", &[], Body::None, 200).await;
    fx.call(api, "GET", "/reset/{server-number}", &[&n], Body::None, 200)
        .await;
    fx.call(
        api,
        "POST",
        "/reset/{server-number}",
        &[&n],
        form(&[("type", "hw")]),
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/reset/{server-number}",
        &[&n],
        form(&[("type", "bogus")]),
        400,
    )
    .await;
    // Wrong password: 401 before any lookup (only once: three failures block the address).
    let wrong = api.with_auth(Auth::Basic {
        user: support::ROBOT_USER.into(),
        password: "wrong".into(),
    });
    fx.call(
        &wrong,
        "GET",
        "/server/{server-number}",
        &["1"],
        Body::None,
        401,
    )
    .await;
    fx.call_unrouted(api, "GET", "/no-such-resource", 404).await;
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_rescue_and_keys() {
    let w = support::start().await;
    let api = &w.robot;
    let mut fx = Fidelity::new("robot_rescue_and_keys");
    let list = fx.call(api, "GET", "/server", &[], Body::None, 200).await;
    let n = fx.need(id_at(&list, "/0/server/server_number"), "a server number");
    let keys = fx.call(api, "GET", "/key", &[], Body::None, 200).await;
    let seeded = fx.need(id_at(&keys, "/0/key/fingerprint"), "the seeded key");
    fx.call(
        api,
        "GET",
        "/key/{fingerprint}",
        &[&seeded],
        Body::None,
        200,
    )
    .await;
    let created = fx
        .call(
            api,
            "POST",
            "/key",
            &[],
            form(&[("name", "deploy"), ("data", KEY_A)]),
            201,
        )
        .await;
    fx.expect(
        created.pointer("/key/fingerprint") == Some(&json!(KEY_A_FINGERPRINT)),
        || "POST /key: fingerprint is not the key's MD5".into(),
    );
    fx.call(
        api,
        "POST",
        "/key",
        &[],
        form(&[("name", "again"), ("data", KEY_A)]),
        409,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/key/{fingerprint}",
        &[KEY_A_FINGERPRINT],
        form(&[("name", "deploy-2")]),
        200,
    )
    .await;

    fx.call(api, "GET", "/boot/{server-number}", &[&n], Body::None, 200)
        .await;
    fx.call(
        api,
        "GET",
        "/boot/{server-number}/rescue",
        &[&n],
        Body::None,
        200,
    )
    .await;
    let active = fx
        .call(
            api,
            "POST",
            "/boot/{server-number}/rescue",
            &[&n],
            form(&[("os", "linux"), ("authorized_key[]", KEY_A_FINGERPRINT)]),
            200,
        )
        .await;
    fx.expect(
        active
            .pointer("/rescue/password")
            .is_some_and(Value::is_string),
        || "POST rescue: no generated password".into(),
    );
    fx.call(
        api,
        "POST",
        "/boot/{server-number}/rescue",
        &[&n],
        form(&[("os", "linux")]),
        409,
    )
    .await;
    fx.call(
        api,
        "DELETE",
        "/boot/{server-number}/rescue",
        &[&n],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "POST",
        "/boot/{server-number}/rescue",
        &[&n],
        form(&[
            ("os", "linux"),
            (
                "authorized_key[]",
                "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff",
            ),
        ]),
        400,
    )
    .await;
    fx.call(
        api,
        "DELETE",
        "/key/{fingerprint}",
        &[KEY_A_FINGERPRINT],
        Body::None,
        200,
    )
    .await;
    fx.call(
        api,
        "DELETE",
        "/key/{fingerprint}",
        &[&seeded],
        Body::None,
        200,
    )
    .await;
    let none = fx.call(api, "GET", "/key", &[], Body::None, 404).await;
    fx.expect(
        none.pointer("/error/code") == Some(&json!("NOT_FOUND")),
        || "GET /key with no keys: code is not NOT_FOUND".into(),
    );
    fx.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robot_rdns() {
    let w = support::start().await;
    let api = &w.robot;
    let mut fx = Fidelity::new("robot_rdns");
    let list = fx.call(api, "GET", "/server", &[], Body::None, 200).await;
    let ip = fx.need(id_at(&list, "/0/server/server_ip"), "a server IPv4 address");
    let missing = fx
        .call(api, "GET", "/rdns/{ip}", &[&ip], Body::None, 404)
        .await;
    fx.expect(
        missing.pointer("/error/code") == Some(&json!("RDNS_NOT_FOUND")),
        || "rDNS of an address without one: code is not RDNS_NOT_FOUND".into(),
    );
    fx.call(
        api,
        "PUT",
        "/rdns/{ip}",
        &[&ip],
        form(&[("ptr", "db.example.com")]),
        201,
    )
    .await;
    let one = fx
        .call(api, "GET", "/rdns/{ip}", &[&ip], Body::None, 200)
        .await;
    fx.expect(
        one.pointer("/rdns/ptr") == Some(&json!("db.example.com")),
        || format!("GET /rdns after PUT: ptr {:?}", one.pointer("/rdns/ptr")),
    );
    fx.call(
        api,
        "POST",
        "/rdns/{ip}",
        &[&ip],
        form(&[("ptr", "db2.example.com")]),
        200,
    )
    .await;
    fx.call(api, "DELETE", "/rdns/{ip}", &[&ip], Body::None, 200)
        .await;
    fx.call(api, "GET", "/rdns/{ip}", &[&ip], Body::None, 404)
        .await;
    fx.call(api, "GET", "/rdns/{ip}", &["192.0.2.250"], Body::None, 404)
        .await;
    fx.finish();
}

// ---------------------------------------------------------------------------------------
// The documented "locked" answers
// ---------------------------------------------------------------------------------------

/// With realistic timings a fresh Hetzner server is locked until `create_server` finishes
/// (`423 locked`, EMULATOR-SPEC §1.6), and a Vultr instance that is still installing
/// refuses deletion with the documented `500 … Server is currently locked` (§2.3); both
/// bodies are the APIs' error envelopes, and both resources accept the request once the
/// work is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_resources_answer_as_documented() {
    let mut config = orc_emu::EmuConfig::for_tests();
    config.timings = orc_emu::Timings::realistic();
    let w = support::start_with(config).await;
    let mut fx = Fidelity::new("locked_resources_answer_as_documented");

    let created = fx
        .call(
            &w.hetzner,
            "POST",
            "/servers",
            &[],
            json_body(json!({"name": "slow-1", "server_type": "cx23",
                "image": "ubuntu-24.04", "location": "fsn1"})),
            201,
        )
        .await;
    let id = fx.need(id_at(&created, "/server/id"), "the created server's id");
    let locked = fx
        .call(
            &w.hetzner,
            "POST",
            "/servers/{id}/actions/poweroff",
            &[&id],
            Body::None,
            423,
        )
        .await;
    fx.expect(
        locked.pointer("/error/code") == Some(&json!("locked")),
        || {
            format!(
                "poweroff while creating: code {:?}",
                locked.pointer("/error/code")
            )
        },
    );
    w.advance(600).await;
    fx.call(
        &w.hetzner,
        "POST",
        "/servers/{id}/actions/poweroff",
        &[&id],
        Body::None,
        201,
    )
    .await;

    let instance = fx
        .call(
            &w.vultr,
            "POST",
            "/instances",
            &[],
            json_body(json!({"region": "ewr", "plan": "vc2-1c-1gb", "os_id": 2284})),
            202,
        )
        .await;
    let iid = fx.need(id_at(&instance, "/instance/id"), "the created instance id");
    let refused = fx
        .call(
            &w.vultr,
            "DELETE",
            "/instances/{instance-id}",
            &[&iid],
            Body::None,
            500,
        )
        .await;
    fx.expect(
        refused
            .get("error")
            .and_then(Value::as_str)
            .is_some_and(|m| m.contains("currently locked")),
        || format!("delete while installing: {:?}", refused.get("error")),
    );
    w.advance(3600).await;
    fx.call(
        &w.vultr,
        "DELETE",
        "/instances/{instance-id}",
        &[&iid],
        Body::None,
        204,
    )
    .await;
    fx.finish();
}

// ---------------------------------------------------------------------------------------
// Rate limits and injected faults (answered by the shared gate, in each API's shape)
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_injected_faults_use_each_api_shape() {
    let w = support::start().await;
    let mut fx = Fidelity::new("rate_limits_and_injected_faults_use_each_api_shape");

    // Hetzner: 429 rate_limit_exceeded with the budget headers still present.
    w.control(Flavor::Hetzner)
        .rate_limit(5, 3600.0, Some(0))
        .await;
    let limited = fx
        .call(&w.hetzner, "GET", "/server_types", &[], Body::None, 429)
        .await;
    fx.expect(
        limited.pointer("/error/code") == Some(&json!("rate_limit_exceeded")),
        || format!("Hetzner 429: code {:?}", limited.pointer("/error/code")),
    );
    let remaining = fx.last_header("ratelimit-remaining").map(str::to_string);
    fx.expect(remaining.as_deref() == Some("0"), || {
        format!("Hetzner 429: RateLimit-Remaining {remaining:?}")
    });
    // Vultr: 429 in its envelope (documented for every operation by the introduction).
    w.control(Flavor::Vultr).rate_limit(5, 1.0, Some(0)).await;
    fx.call(&w.vultr, "GET", "/account", &[], Body::None, 429)
        .await;
    // Robot: the limit is a 403 with the budget in the body.
    w.control(Flavor::Robot)
        .rate_limit(5, 3600.0, Some(0))
        .await;
    let robot = fx
        .call(&w.robot, "GET", "/server", &[], Body::None, 403)
        .await;
    fx.expect(
        robot.pointer("/error/code") == Some(&json!("RATE_LIMIT_EXCEEDED"))
            && robot.pointer("/error/max_request").is_some()
            && robot.pointer("/error/interval").is_some(),
        || format!("Robot rate limit body: {robot}"),
    );

    // Injected server errors keep each API's envelope.
    for (flavor, root_path, api_path) in [
        (Flavor::Hetzner, "/v1/pricing", "/pricing"),
        (Flavor::Vultr, "/v2/plans", "/plans"),
        (Flavor::Robot, "/key", "/key"),
    ] {
        w.lift_rate_limit(flavor).await;
        w.control(flavor).fault(Fault::new(root_path, 503, 1)).await;
        let api = match flavor {
            Flavor::Hetzner => &w.hetzner,
            Flavor::Vultr => &w.vultr,
            Flavor::Robot => &w.robot,
        };
        fx.call_unrouted(api, "GET", api_path, 503).await;
    }
    fx.finish();
}
