-- 063: the Block Storage service's own service records (Cinder's services
-- table; nova's `services` is the compute's), written by the heartbeats of
-- the cinder-scheduler and cinder-volume parts of the process that serves
-- the volume API, shown by GET /volume/v3/{project_id}/os-services.
CREATE TABLE volume_services (
    id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    binary TEXT NOT NULL,
    topic TEXT,
    report_count INTEGER NOT NULL DEFAULT 0,
    disabled INTEGER NOT NULL DEFAULT 0,
    disabled_reason TEXT,
    availability_zone TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (host, binary, deleted)
);
