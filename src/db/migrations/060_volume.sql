-- 060: the block storage service (Cinder's tables and columns, so the
-- runbooks' `SELECT ... FROM volumes WHERE deleted = 0` work as is).
-- As in Cinder, ids are UUID strings and `deleted` is a boolean (0/1).
-- Cinder's own quota tables are named quotas/quota_usages; nubo shares one
-- database with Nova's `quotas`, so the volume limits live in volume_quotas
-- (usage is counted from volumes and snapshots, not cached).
CREATE TABLE volume_types (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT,
    is_public INTEGER NOT NULL DEFAULT 1,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
-- Cinder's default type (Zed always has one); the id is fixed for nubo.
INSERT INTO volume_types (id, name, description, is_public, created_at)
VALUES ('5f4e0d2a-6a1d-4b8e-9a57-3c1d7b0e8f21', '__DEFAULT__', 'Default Volume Type', 1,
        '2026-01-01T00:00:00.000000');
CREATE TABLE volumes (
    id TEXT PRIMARY KEY,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    user_id TEXT,
    project_id TEXT,
    host TEXT,
    size INTEGER,
    availability_zone TEXT,
    status TEXT,
    attach_status TEXT,
    previous_status TEXT,
    migration_status TEXT,
    replication_status TEXT,
    scheduled_at TEXT,
    launched_at TEXT,
    terminated_at TEXT,
    display_name TEXT,
    display_description TEXT,
    provider_location TEXT,
    snapshot_id TEXT,
    source_volid TEXT,
    volume_type_id TEXT,
    encryption_key_id TEXT,
    bootable INTEGER NOT NULL DEFAULT 0,
    multiattach INTEGER NOT NULL DEFAULT 0,
    use_quota INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX volumes_project ON volumes (project_id, deleted);
CREATE TABLE volume_metadata (
    id INTEGER PRIMARY KEY,
    volume_id TEXT NOT NULL REFERENCES volumes (id),
    key TEXT NOT NULL,
    value TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX volume_metadata_volume ON volume_metadata (volume_id, deleted);
-- Cinder's volume_glance_metadata: the image a volume was made from.
CREATE TABLE volume_glance_metadata (
    id INTEGER PRIMARY KEY,
    volume_id TEXT REFERENCES volumes (id),
    snapshot_id TEXT,
    key TEXT NOT NULL,
    value TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
-- provider_location: the qcow2 overlay (volume-<vol>.<snap>) that became the
-- volume's active file when the snapshot was taken; the snapshot's data is
-- that overlay's backing file. NULL when no overlay exists (error).
CREATE TABLE snapshots (
    id TEXT PRIMARY KEY,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    volume_id TEXT NOT NULL REFERENCES volumes (id),
    user_id TEXT,
    project_id TEXT,
    status TEXT,
    progress TEXT,
    volume_size INTEGER,
    display_name TEXT,
    display_description TEXT,
    provider_location TEXT,
    volume_type_id TEXT,
    use_quota INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX snapshots_volume ON snapshots (volume_id, deleted);
CREATE INDEX snapshots_project ON snapshots (project_id, deleted);
CREATE TABLE snapshot_metadata (
    id INTEGER PRIMARY KEY,
    snapshot_id TEXT NOT NULL REFERENCES snapshots (id),
    key TEXT NOT NULL,
    value TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
-- For the attach work to come: Cinder's attachment records.
CREATE TABLE volume_attachment (
    id TEXT PRIMARY KEY,
    volume_id TEXT NOT NULL REFERENCES volumes (id),
    instance_uuid TEXT,
    attached_host TEXT,
    mountpoint TEXT,
    attach_time TEXT,
    detach_time TEXT,
    attach_mode TEXT,
    attach_status TEXT,
    connection_info TEXT,
    connector TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX volume_attachment_volume ON volume_attachment (volume_id, deleted);
CREATE TABLE volume_quotas (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    resource TEXT NOT NULL,
    hard_limit INTEGER NOT NULL,
    created_at TEXT,
    updated_at TEXT,
    UNIQUE (project_id, resource)
);
