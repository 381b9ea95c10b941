-- MariaDB form of ../061_volume_admin_metadata.sql (same number; see docs/architecture.md, Database).
-- 061: Cinder's volume_admin_metadata. Key "format" holds the format of the
-- volume's active file ("raw" | "qcow2") as the volume service last knew it;
-- the compute agent corrects it together with the mapping's connection_info
-- when it finds the file's real format differs (reconcile_disk_format).
CREATE TABLE volume_admin_metadata (
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
CREATE INDEX volume_admin_metadata_volume ON volume_admin_metadata (volume_id, deleted);
