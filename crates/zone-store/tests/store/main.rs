//! The store test suite. Every case in `cases` runs once on SQLite and once on PostgreSQL
//! (`sqlite::NAME` and `postgres::NAME`); PostgreSQL needs `ORC_TEST_POSTGRES_URL` (see
//! `harness::postgres`).

mod cases;
mod harness;

macro_rules! on_both_engines {
    ($($case:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let db = crate::harness::sqlite().await;
                    crate::cases::$case(&db).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let db = crate::harness::postgres().await;
                    crate::cases::$case(&db).await;
                }
            )+
        }
    };
}

on_both_engines!(
    migrations_are_idempotent,
    migrations_move_an_older_database_forward,
    migrations_name_gateway_pools_after_their_provider,
    migrations_keep_refusals_and_take_unplaceable,
    tenancy_crud,
    unique_violations_name_the_field,
    database_errors_name_their_operation,
    tokens_are_stored_as_hashes,
    join_tokens_admit_one_node_once,
    node_agents_join_report_and_renew,
    node_agents_are_written_in_one_batch,
    deletes_take_only_empty_tenancy,
    providers_crud,
    pools_crud_and_resize,
    pool_reconfigure_is_compare_and_set,
    node_writes_are_compare_and_set,
    due_nodes_come_in_order,
    batch_writes_apply_or_refuse_each_node,
    failed_transactions_leave_nothing_half_written,
    money_round_trips_exactly,
    events_filter_and_page,
    repeated_node_events_are_counted_and_newest_come_last,
    usage_accumulates_per_line,
    concurrent_writers_one_wins,
    concurrent_resizes_keep_one_node_per_slot,
    corrupt_rows_are_reported_not_panicked,
    lost_nodes_and_free_slots,
    mesh_addresses_are_unique_and_quarantined_before_reuse,
    access_keys_rotate_sealed_and_retire_on_time,
    certificates_are_sealed_and_follow_their_domain,
    sessions_hold_until_signed_out_idle_expired_or_their_token_ends,
    app_registry_tags_move_and_unused_packages_go,
    app_binaries_belong_to_the_orgs_that_hold_them,
    a_sole_principal_serves_its_first_provider_only,
    mesh_projects_carry_their_org_and_project_names,
    images_keep_manifests_tags_and_what_they_name,
    apps_keep_revisions_states_and_placements,
    node_labels_and_cordons,
    secrets_are_sealed_versioned_and_kept_per_project,
);
