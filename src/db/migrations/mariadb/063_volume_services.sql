-- MariaDB form of ../063_volume_services.sql (same number; see docs/architecture.md, Database).
-- 063: the Block Storage service's own service records (Cinder's services
-- table; nova's `services` is the compute's), written by the heartbeats of
-- the cinder-scheduler and cinder-volume parts of the process that serves
-- the volume API, shown by GET /volume/v3/{project_id}/os-services.
CREATE TABLE volume_services (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    host VARCHAR(191) NOT NULL,
    "binary" VARCHAR(191) NOT NULL,
    topic MEDIUMTEXT,
    report_count BIGINT NOT NULL DEFAULT 0,
    disabled BIGINT NOT NULL DEFAULT 0,
    disabled_reason MEDIUMTEXT,
    availability_zone MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    UNIQUE (host, "binary", deleted)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
