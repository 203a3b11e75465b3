-- Gateway pool names carry their provider: `gw-<provider>-<site>` instead of `gw-<site>`,
-- since two providers may each have a site of the same name. Portable SQL (see 0001).
--
-- Gateway pools are the pools of project sys/sys (id p-000000000002) that ask for the OS
-- `gateway`. A new name longer than a pool name may be (63) keeps the old one.
UPDATE pools
SET name = 'gw-' || (SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id)
    || '-' || substr(pools.name, 4)
WHERE project_id = 'p-000000000002'
    AND os = 'gateway'
    AND name LIKE 'gw-%'
    AND length('gw-' || (SELECT pr.name FROM providers pr WHERE pr.id = pools.provider_id)
        || '-' || substr(pools.name, 4)) <= 63;
