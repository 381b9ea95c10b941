-- 062: the volume service's user messages (Cinder's messages table, shown by
-- GET /volume/v3/{project_id}/messages), the kind of a snapshot, and the
-- attachments of a project as one relation for the attachments API.
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    request_id TEXT,
    resource_type TEXT,
    resource_uuid TEXT,
    event_id TEXT NOT NULL,
    detail_id TEXT,
    action_id TEXT,
    message_level TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    expires_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_project ON messages (project_id, deleted);
-- 0: a qcow2 overlay in the volume's chain (provider_location is the overlay
-- file, which became the volume's active file when the snapshot was taken).
-- 1: a standalone copy of the volume's data (taken of an in-use volume, whose
-- active file a running guest holds open and so cannot change); it has no
-- backing file and is not part of the chain.
ALTER TABLE snapshots ADD COLUMN standalone INTEGER NOT NULL DEFAULT 0;
-- Cinder lists attachments by the project of their volume.
CREATE VIEW attachments AS
    SELECT a.*, v.project_id AS project_id
    FROM volume_attachment a JOIN volumes v ON v.id = a.volume_id;
