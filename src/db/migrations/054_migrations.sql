-- 054: Nova's migrations table (nova/db/main/models.py, class Migration):
-- one row per move of an instance (cold migration, resize, live migration,
-- evacuation) with its status and, for live migrations, its progress.
-- Soft delete as Nova: deleted = 0 while live, the row id once deleted.
-- Written only by src/compute/objects/migration.c.
CREATE TABLE migrations (
    id INTEGER PRIMARY KEY,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    source_compute TEXT,
    dest_compute TEXT,
    source_node TEXT,
    dest_node TEXT,
    dest_host TEXT,
    old_instance_type_id INTEGER,
    new_instance_type_id INTEGER,
    instance_uuid TEXT REFERENCES instances (uuid),
    uuid TEXT,
    status TEXT,
    migration_type TEXT CHECK (migration_type IS NULL OR migration_type IN
        ('migration', 'resize', 'live-migration', 'evacuation')),
    hidden INTEGER NOT NULL DEFAULT 0,
    memory_total INTEGER,
    memory_processed INTEGER,
    memory_remaining INTEGER,
    disk_total INTEGER,
    disk_processed INTEGER,
    disk_remaining INTEGER,
    cross_cell_move INTEGER NOT NULL DEFAULT 0,
    user_id TEXT,
    project_id TEXT
);
CREATE INDEX migrations_instance_uuid_and_status_idx ON migrations (deleted, instance_uuid, status);
CREATE INDEX migrations_by_host_nodes_and_status_idx
    ON migrations (deleted, source_compute, dest_compute, source_node, dest_node, status);
CREATE UNIQUE INDEX migrations_uuid ON migrations (uuid);
CREATE INDEX migrations_updated_at_idx ON migrations (updated_at);
