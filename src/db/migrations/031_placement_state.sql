-- 031_placement_state: a version number placement bumps in every
-- transaction that changes providers, their tree, inventories, traits or
-- aggregates (not allocations). Searches keep a parsed snapshot of those
-- tables and reuse it while the version is unchanged, so a candidate
-- search costs one small usage query instead of re-reading everything.
CREATE TABLE placement_state (
    id INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
);
INSERT INTO placement_state (id, version) VALUES (1, 0);
