-- MariaDB form of ../054_migrations.sql (same number; see docs/architecture.md, Database).
-- 054: Nova's migrations table (nova/db/main/models.py, class Migration):
-- one row per move of an instance (cold migration, resize, live migration,
-- evacuation) with its status and, for live migrations, its progress.
-- Soft delete as Nova: deleted = 0 while live, the row id once deleted.
-- Written only by src/compute/objects/migration.c.
CREATE TABLE migrations (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    created_at MEDIUMTEXT,
    updated_at VARCHAR(191),
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    source_compute VARCHAR(191),
    dest_compute VARCHAR(191),
    source_node VARCHAR(191),
    dest_node VARCHAR(191),
    dest_host MEDIUMTEXT,
    old_instance_type_id BIGINT,
    new_instance_type_id BIGINT,
    instance_uuid VARCHAR(191),
    uuid VARCHAR(191),
    status VARCHAR(191),
    migration_type VARCHAR(191) CHECK (migration_type IS NULL OR migration_type IN
        ('migration', 'resize', 'live-migration', 'evacuation')),
    hidden BIGINT NOT NULL DEFAULT 0,
    memory_total BIGINT,
    memory_processed BIGINT,
    memory_remaining BIGINT,
    disk_total BIGINT,
    disk_processed BIGINT,
    disk_remaining BIGINT,
    cross_cell_move BIGINT NOT NULL DEFAULT 0,
    user_id VARCHAR(191),
    project_id VARCHAR(191),
    FOREIGN KEY (instance_uuid) REFERENCES instances (uuid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX migrations_instance_uuid_and_status_idx ON migrations (deleted, instance_uuid, status);
CREATE INDEX migrations_by_host_nodes_and_status_idx
    ON migrations (deleted, source_compute(120), dest_compute(120), source_node(120),
        dest_node(120), status(120)); -- prefixes: InnoDB keys are at most 3072 bytes
CREATE UNIQUE INDEX migrations_uuid ON migrations (uuid);
CREATE INDEX migrations_updated_at_idx ON migrations (updated_at);
