-- 089: leases between control planes sharing one database (issue 13,
-- "Several control planes"; db/lease.h): name (conductor@<host>:<pid>, a
-- control plane's liveness; conductor.periodic, the periodic work that runs
-- once), its holder and when it expires (epoch seconds, the database's
-- clock). instances.nubo_conductor: the control plane (its liveness lease)
-- that last moved the instance's state, so that start-up recovery leaves
-- the work of a live control plane alone and takes over a dead one's.
CREATE TABLE nubo_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
ALTER TABLE instances ADD COLUMN nubo_conductor TEXT;
