//! The console's pages from fixed view models: one golden file per page (as a member of a
//! tenant's project, and the pages that differ for a viewer and for a member of `sys`), and
//! no cloud, plan, city or cloud location on any page a tenant sees, even when the models
//! the views are handed carry where nodes went.

use orc_testkit::console_sample as sample;

/// One tag per line, so a golden file's diff shows what changed.
fn readable(html: &str) -> String {
    let mut out = html.replace("><", ">\n<");
    out.push('\n');
    out
}

fn golden(name: &str, html: &str) {
    orc_testkit::golden::check(env!("CARGO_MANIFEST_DIR"), name, &readable(html));
}

#[test]
fn every_page_of_a_member_matches_its_golden_file() {
    for (name, html) in sample::every_page("member", false, 3, 3) {
        golden(&format!("console_{name}"), &html);
    }
}

#[test]
fn a_viewer_gets_no_forms_and_a_sys_member_sees_where_nodes_went() {
    let pages = sample::every_page("viewer", false, 3, 3);
    for (name, html) in &pages {
        if matches!(name.as_str(), "pool" | "request-offer") {
            golden(&format!("console_viewer_{name}"), html);
        }
    }
    let pool = &pages.iter().find(|(n, _)| n == "pool").unwrap().1;
    assert!(
        !pool.contains("/resize") && !pool.contains("/delete"),
        "{pool}"
    );
    let sys = sample::every_page("owner", true, 3, 3);
    let pool = &sys.iter().find(|(n, _)| n == "pool").unwrap().1;
    golden("console_sys_pool", pool);
    assert!(
        sample::cloud_words_in(pool).contains(&"hetzner".to_string()),
        "the check finds what it looks for"
    );
}

#[test]
fn no_tenant_page_names_a_cloud_plan_city_or_location() {
    for role in ["viewer", "member", "owner"] {
        for (name, html) in sample::every_page(role, false, 20, 200) {
            let found = sample::cloud_words_in(&html);
            assert!(found.is_empty(), "{role} {name}: {found:?}");
        }
    }
}

#[test]
fn no_page_holds_a_sensitive_value_typed_into_the_pool_form() {
    for (name, html) in sample::every_page("member", false, 3, 3) {
        assert!(!html.contains("typed-secret"), "{name}");
    }
}

#[test]
fn the_cloud_word_check_matches_whole_words_only() {
    assert_eq!(
        sample::cloud_words_in("<p>at fsn1 on cx23</p>"),
        ["fsn1", "cx23"]
    );
    assert_eq!(sample::cloud_words_in("<p>vc2-1c-1gb</p>"), ["vc2-"]);
    assert!(sample::cloud_words_in("<p>a fragment, a seat, assets</p>").is_empty());
    assert_eq!(sample::cloud_words_in("<td>FRA</td>"), ["fra"]);
}

#[test]
fn an_execs_lines_become_each_streams_text_and_its_exit() {
    let lines = concat!(
        r#"{"type":"output","stream":"stdout","data":"aGVsbG8K"}"#,
        "\n",
        r#"{"type":"output","stream":"stderr","data":"b29wcwo="}"#,
        "\n",
        r#"{"type":"exit","code":3,"error":null}"#,
        "\n"
    );
    let result = orc_web::console::exec_result(vec!["sh".into()], lines.as_bytes());
    assert_eq!(result.stdout, "hello\n");
    assert_eq!(result.stderr, "oops\n");
    assert_eq!(result.code, Some(3));
    assert!(!result.truncated && result.error.is_none());
    let killed = orc_web::console::exec_result(
        vec!["sleep".into()],
        br#"{"type":"exit","code":null,"error":"killed after 60 s"}"#,
    );
    assert_eq!(killed.code, None);
    assert_eq!(killed.error.as_deref(), Some("killed after 60 s"));
}

#[test]
fn a_node_page_shows_a_minted_secret_once_and_no_form_to_a_viewer() {
    let member = sample::every_page("member", false, 3, 3);
    let node = &member.iter().find(|(n, _)| n == "node").unwrap().1;
    assert_eq!(node.matches("orc-join-SAMPLE-secret").count(), 1, "{node}");
    assert!(
        node.contains("/exec") && node.contains("/join-token"),
        "{node}"
    );
    let viewer = sample::every_page("viewer", false, 3, 3);
    let node = &viewer.iter().find(|(n, _)| n == "node").unwrap().1;
    assert!(
        !node.contains("/exec") && !node.contains("/join-token"),
        "{node}"
    );
}
