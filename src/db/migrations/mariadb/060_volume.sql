-- MariaDB form of ../060_volume.sql (same number; see docs/architecture.md, Database).
-- 060: the block storage service (Cinder's tables and columns, so the
-- runbooks' `SELECT ... FROM volumes WHERE deleted = 0` work as is).
-- As in Cinder, ids are UUID strings and `deleted` is a boolean (0/1).
-- Cinder's own quota tables are named quotas/quota_usages; nubo shares one
-- database with Nova's `quotas`, so the volume limits live in volume_quotas
-- (usage is counted from volumes and snapshots, not cached).
CREATE TABLE volume_types (
    id VARCHAR(191) PRIMARY KEY,
    name MEDIUMTEXT NOT NULL,
    description MEDIUMTEXT,
    is_public BIGINT NOT NULL DEFAULT 1,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- Cinder's default type (Zed always has one); the id is fixed for nubo.
INSERT INTO volume_types (id, name, description, is_public, created_at)
VALUES ('5f4e0d2a-6a1d-4b8e-9a57-3c1d7b0e8f21', '__DEFAULT__', 'Default Volume Type', 1,
        '2026-01-01T00:00:00.000000');
CREATE TABLE volumes (
    id VARCHAR(191) PRIMARY KEY,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    user_id VARCHAR(191),
    project_id VARCHAR(191),
    host MEDIUMTEXT,
    size BIGINT,
    availability_zone MEDIUMTEXT,
    status MEDIUMTEXT,
    attach_status MEDIUMTEXT,
    previous_status MEDIUMTEXT,
    migration_status MEDIUMTEXT,
    replication_status MEDIUMTEXT,
    scheduled_at MEDIUMTEXT,
    launched_at MEDIUMTEXT,
    terminated_at MEDIUMTEXT,
    display_name MEDIUMTEXT,
    display_description MEDIUMTEXT,
    provider_location MEDIUMTEXT,
    snapshot_id VARCHAR(191),
    source_volid MEDIUMTEXT,
    volume_type_id VARCHAR(191),
    encryption_key_id VARCHAR(191),
    bootable BIGINT NOT NULL DEFAULT 0,
    multiattach BIGINT NOT NULL DEFAULT 0,
    use_quota BIGINT NOT NULL DEFAULT 1
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX volumes_project ON volumes (project_id, deleted);
CREATE TABLE volume_metadata (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    volume_id VARCHAR(191) NOT NULL,
    "key" MEDIUMTEXT NOT NULL,
    value MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (volume_id) REFERENCES volumes (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX volume_metadata_volume ON volume_metadata (volume_id, deleted);
-- Cinder's volume_glance_metadata: the image a volume was made from.
CREATE TABLE volume_glance_metadata (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    volume_id VARCHAR(191),
    snapshot_id VARCHAR(191),
    "key" MEDIUMTEXT NOT NULL,
    value MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (volume_id) REFERENCES volumes (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- provider_location: the qcow2 overlay (volume-<vol>.<snap>) that became the
-- volume's active file when the snapshot was taken; the snapshot's data is
-- that overlay's backing file. NULL when no overlay exists (error).
CREATE TABLE snapshots (
    id VARCHAR(191) PRIMARY KEY,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    volume_id VARCHAR(191) NOT NULL,
    user_id VARCHAR(191),
    project_id VARCHAR(191),
    status MEDIUMTEXT,
    progress MEDIUMTEXT,
    volume_size BIGINT,
    display_name MEDIUMTEXT,
    display_description MEDIUMTEXT,
    provider_location MEDIUMTEXT,
    volume_type_id VARCHAR(191),
    use_quota BIGINT NOT NULL DEFAULT 1,
    FOREIGN KEY (volume_id) REFERENCES volumes (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX snapshots_volume ON snapshots (volume_id, deleted);
CREATE INDEX snapshots_project ON snapshots (project_id, deleted);
CREATE TABLE snapshot_metadata (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    snapshot_id VARCHAR(191) NOT NULL,
    "key" MEDIUMTEXT NOT NULL,
    value MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (snapshot_id) REFERENCES snapshots (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- For the attach work to come: Cinder's attachment records.
CREATE TABLE volume_attachment (
    id VARCHAR(191) PRIMARY KEY,
    volume_id VARCHAR(191) NOT NULL,
    instance_uuid VARCHAR(191),
    attached_host MEDIUMTEXT,
    mountpoint MEDIUMTEXT,
    attach_time MEDIUMTEXT,
    detach_time MEDIUMTEXT,
    attach_mode MEDIUMTEXT,
    attach_status MEDIUMTEXT,
    connection_info MEDIUMTEXT,
    connector MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (volume_id) REFERENCES volumes (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX volume_attachment_volume ON volume_attachment (volume_id, deleted);
CREATE TABLE volume_quotas (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    project_id VARCHAR(191) NOT NULL,
    resource VARCHAR(191) NOT NULL,
    hard_limit BIGINT NOT NULL,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    UNIQUE (project_id, resource)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
