-- Why a replica failed or waits, in the words its node reports ("cannot fetch …"), so
-- `orc app status` can say it. NULL while there is nothing to say. Portable SQL (see 0001).
ALTER TABLE app_replicas ADD COLUMN message TEXT;
