-- MariaDB form of ../040_compute_api_servers.sql (same number; see docs/architecture.md, Database).
-- 040_compute_api_servers: what the Compute API's servers need beyond 001.
-- Nova keeps the flavor's sizes on the instance row (quota counting reads
-- them), the kernel/ramdisk of the image, the disk-config choice, and the
-- trusted certificate IDs (Nova's instance_extra.trusted_certs).
ALTER TABLE instances ADD COLUMN vcpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN memory_mb BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN root_gb BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN ephemeral_gb BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN kernel_id VARCHAR(191) NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN ramdisk_id VARCHAR(191) NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN auto_disk_config BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN trusted_certs MEDIUMTEXT;

-- Server tags (Nova's tags table; resource_id is the instance UUID).
CREATE TABLE tags (
    resource_id VARCHAR(191) NOT NULL,
    tag VARCHAR(191) NOT NULL,
    PRIMARY KEY (resource_id, tag)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Listing a project's servers newest first, and the instance actions of a server.
CREATE INDEX instances_project_created ON instances (project_id, deleted, created_at);
CREATE INDEX instance_metadata_key ON instance_metadata (instance_uuid, "key");
CREATE INDEX instance_actions_uuid_created ON instance_actions (instance_uuid, created_at);
