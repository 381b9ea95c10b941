-- MariaDB form of ../062_volume_messages.sql (same number; see docs/architecture.md, Database).
-- 062: the volume service's user messages (Cinder's messages table, shown by
-- GET /volume/v3/{project_id}/messages), the kind of a snapshot, and the
-- attachments of a project as one relation for the attachments API.
CREATE TABLE messages (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    request_id VARCHAR(191),
    resource_type MEDIUMTEXT,
    resource_uuid VARCHAR(191),
    event_id VARCHAR(191) NOT NULL,
    detail_id VARCHAR(191),
    action_id VARCHAR(191),
    message_level MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    expires_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX messages_project ON messages (project_id, deleted);
-- 0: a qcow2 overlay in the volume's chain (provider_location is the overlay
-- file, which became the volume's active file when the snapshot was taken).
-- 1: a standalone copy of the volume's data (taken of an in-use volume, whose
-- active file a running guest holds open and so cannot change); it has no
-- backing file and is not part of the chain.
ALTER TABLE snapshots ADD COLUMN standalone BIGINT NOT NULL DEFAULT 0;
-- Cinder lists attachments by the project of their volume.
CREATE VIEW attachments AS
    SELECT a.*, v.project_id AS project_id
    FROM volume_attachment a JOIN volumes v ON v.id = a.volume_id;
