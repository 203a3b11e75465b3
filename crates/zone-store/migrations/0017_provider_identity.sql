-- Providers are known by id, and bare names are the zone operator's. Portable SQL (see 0001).
--
-- `org_id`: the org of the project a provider registered in (a project never changes org),
-- so whether a provider is the operator's (org sys, o-000000000001) is read off its row.
-- `sys_name`: the name of a provider of org sys, NULL for every other; unique, so one bare
-- name means one provider across the whole org. Should two providers of org sys already
-- share a name, the older keeps it as its bare name.
--
-- Gateway pools (`gw-<provider name>-<site>` in sys/sys, OS `gateway`) are renamed
-- `gw-<provider id>-<site>`: a name is what anyone may choose, an id is not.
ALTER TABLE providers ADD COLUMN org_id TEXT;
UPDATE providers
SET org_id = (SELECT pr.org_id FROM projects pr WHERE pr.id = providers.project_id);

ALTER TABLE providers ADD COLUMN sys_name TEXT;
UPDATE providers
SET sys_name = name
WHERE org_id = 'o-000000000001'
    AND NOT EXISTS (
        SELECT 1 FROM providers older
        WHERE older.org_id = 'o-000000000001' AND older.name = providers.name
            AND older.id < providers.id
    );
CREATE UNIQUE INDEX providers_sys_name_unique ON providers (sys_name);

UPDATE pools
SET name = 'gw-' || provider_id || '-'
    || substr(name, length('gw-' || (SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id) || '-') + 1)
WHERE project_id = 'p-000000000002'
    AND os = 'gateway'
    AND substr(name, 1, length('gw-' || (SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id) || '-'))
        = 'gw-' || (SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id) || '-'
    AND length(name) - length((SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id))
        + length(provider_id) <= 63;
