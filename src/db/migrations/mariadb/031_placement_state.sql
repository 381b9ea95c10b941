-- MariaDB form of ../031_placement_state.sql (same number; see docs/architecture.md, Database).
-- 031_placement_state: a version number placement bumps in every
-- transaction that changes providers, their tree, inventories, traits or
-- aggregates (not allocations). Searches keep a parsed snapshot of those
-- tables and reuse it while the version is unchanged, so a candidate
-- search costs one small usage query instead of re-reading everything.
CREATE TABLE placement_state (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    version BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO placement_state (id, version) VALUES (1, 0);
