-- MariaDB form of ../055_instance_moves.sql (same number; see docs/architecture.md, Database).
-- 055_instance_moves: what a move of an instance needs on its row. Nova
-- keeps the flavors of a resize in instance_extra.flavor as {"cur", "old",
-- "new"}: the current one is instances.flavor here, old_flavor and
-- new_flavor hold the other two (JSON) from prep_resize until the resize is
-- confirmed or reverted, NULL otherwise.
ALTER TABLE instances ADD COLUMN old_flavor MEDIUMTEXT;
ALTER TABLE instances ADD COLUMN new_flavor MEDIUMTEXT;

-- Which migrations of a host are in flight (a restarted agent or conductor
-- looks for them), and os-migrations filtered by type.
CREATE INDEX migrations_status_type_idx ON migrations (deleted, status, migration_type);
