-- 061: Cinder's volume_admin_metadata. Key "format" holds the format of the
-- volume's active file ("raw" | "qcow2") as the volume service last knew it;
-- the compute agent corrects it together with the mapping's connection_info
-- when it finds the file's real format differs (reconcile_disk_format).
CREATE TABLE volume_admin_metadata (
    id INTEGER PRIMARY KEY,
    volume_id TEXT NOT NULL REFERENCES volumes (id),
    key TEXT NOT NULL,
    value TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX volume_admin_metadata_volume ON volume_admin_metadata (volume_id, deleted);
