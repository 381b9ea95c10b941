-- 001_initial: the tables every role shares. Table and column names follow
-- Nova, Placement, Keystone and Glance where operators query them, so runbook
-- SQL runs unchanged. Soft delete: deleted = 0 while live, = id when deleted.

-- Identity (keystone) ------------------------------------------------------
CREATE TABLE project (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    domain_id TEXT NOT NULL DEFAULT 'default',
    description TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1,
    is_domain INTEGER NOT NULL DEFAULT 0,
    parent_id TEXT,
    extra TEXT NOT NULL DEFAULT '{}',
    created_at TEXT,
    UNIQUE (domain_id, name)
);
CREATE TABLE user (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    domain_id TEXT NOT NULL DEFAULT 'default',
    password_hash TEXT,
    enabled INTEGER NOT NULL DEFAULT 1,
    default_project_id TEXT,
    description TEXT NOT NULL DEFAULT '',
    email TEXT,
    extra TEXT NOT NULL DEFAULT '{}',
    created_at TEXT,
    UNIQUE (domain_id, name)
);
CREATE TABLE role (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    domain_id TEXT,
    description TEXT NOT NULL DEFAULT ''
);
-- type: UserProject (the only one used so far), UserDomain.
CREATE TABLE assignment (
    type TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    role_id TEXT NOT NULL,
    PRIMARY KEY (type, actor_id, target_id, role_id)
);
-- Tokens are random; only their SHA-256 is stored.
CREATE TABLE token (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    project_id TEXT,
    domain_id TEXT,
    issued_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    audit_id TEXT NOT NULL,
    methods TEXT NOT NULL DEFAULT '["password"]'
);
CREATE INDEX token_expires ON token (expires_at);

-- Image (glance) -----------------------------------------------------------
CREATE TABLE images (
    id TEXT PRIMARY KEY,
    name TEXT,
    status TEXT NOT NULL DEFAULT 'queued',
    visibility TEXT NOT NULL DEFAULT 'shared',
    protected INTEGER NOT NULL DEFAULT 0,
    os_hidden INTEGER NOT NULL DEFAULT 0,
    disk_format TEXT,
    container_format TEXT,
    size INTEGER,
    virtual_size INTEGER,
    checksum TEXT,
    os_hash_algo TEXT,
    os_hash_value TEXT,
    min_disk INTEGER NOT NULL DEFAULT 0,
    min_ram INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE image_properties (
    image_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (image_id, name)
);
CREATE TABLE image_tags (
    image_id TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (image_id, value)
);

-- Placement ------------------------------------------------------------------
CREATE TABLE resource_providers (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    generation INTEGER NOT NULL DEFAULT 0,
    root_provider_id INTEGER,
    parent_provider_id INTEGER,
    created_at TEXT,
    updated_at TEXT
);
CREATE TABLE resource_classes (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE inventories (
    id INTEGER PRIMARY KEY,
    resource_provider_id INTEGER NOT NULL,
    resource_class TEXT NOT NULL,
    total INTEGER NOT NULL,
    reserved INTEGER NOT NULL DEFAULT 0,
    min_unit INTEGER NOT NULL DEFAULT 1,
    max_unit INTEGER NOT NULL,
    step_size INTEGER NOT NULL DEFAULT 1,
    allocation_ratio REAL NOT NULL DEFAULT 1.0,
    UNIQUE (resource_provider_id, resource_class)
);
CREATE TABLE consumers (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    project_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    consumer_type TEXT,
    generation INTEGER NOT NULL DEFAULT 0,
    created_at TEXT,
    updated_at TEXT
);
CREATE TABLE allocations (
    id INTEGER PRIMARY KEY,
    resource_provider_id INTEGER NOT NULL,
    consumer_id TEXT NOT NULL,
    resource_class TEXT NOT NULL,
    used INTEGER NOT NULL,
    created_at TEXT
);
CREATE INDEX allocations_rp ON allocations (resource_provider_id, resource_class);
CREATE INDEX allocations_consumer ON allocations (consumer_id);
CREATE TABLE traits (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE resource_provider_traits (
    resource_provider_id INTEGER NOT NULL,
    trait_id INTEGER NOT NULL,
    PRIMARY KEY (resource_provider_id, trait_id)
);
CREATE TABLE resource_provider_aggregates (
    resource_provider_id INTEGER NOT NULL,
    aggregate_uuid TEXT NOT NULL,
    PRIMARY KEY (resource_provider_id, aggregate_uuid)
);

-- Compute (nova) -------------------------------------------------------------
CREATE TABLE flavors (
    id INTEGER PRIMARY KEY,
    flavorid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    memory_mb INTEGER NOT NULL,
    vcpus INTEGER NOT NULL,
    root_gb INTEGER NOT NULL DEFAULT 0,
    ephemeral_gb INTEGER NOT NULL DEFAULT 0,
    swap INTEGER NOT NULL DEFAULT 0,
    rxtx_factor REAL NOT NULL DEFAULT 1.0,
    is_public INTEGER NOT NULL DEFAULT 1,
    disabled INTEGER NOT NULL DEFAULT 0,
    description TEXT,
    created_at TEXT,
    updated_at TEXT
);
CREATE TABLE flavor_extra_specs (
    flavor_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (flavor_id, key)
);
CREATE TABLE flavor_projects (
    flavor_id INTEGER NOT NULL,
    project_id TEXT NOT NULL,
    PRIMARY KEY (flavor_id, project_id)
);
CREATE TABLE key_pairs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    public_key TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT 'ssh',
    created_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (user_id, name, deleted)
);
CREATE TABLE quotas (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    user_id TEXT,
    resource TEXT NOT NULL,
    hard_limit INTEGER NOT NULL,
    UNIQUE (project_id, user_id, resource)
);
CREATE TABLE services (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    host TEXT NOT NULL,
    binary TEXT NOT NULL,
    topic TEXT,
    report_count INTEGER NOT NULL DEFAULT 0,
    disabled INTEGER NOT NULL DEFAULT 0,
    disabled_reason TEXT,
    forced_down INTEGER NOT NULL DEFAULT 0,
    last_seen_up TEXT,
    version INTEGER NOT NULL DEFAULT 66,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (host, binary, deleted)
);
CREATE TABLE compute_nodes (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    service_id INTEGER,
    host TEXT NOT NULL,
    hypervisor_hostname TEXT NOT NULL,
    hypervisor_type TEXT NOT NULL,
    hypervisor_version INTEGER NOT NULL,
    cpu_info TEXT NOT NULL DEFAULT '{}',
    vcpus INTEGER NOT NULL,
    memory_mb INTEGER NOT NULL,
    local_gb INTEGER NOT NULL,
    vcpus_used INTEGER NOT NULL DEFAULT 0,
    memory_mb_used INTEGER NOT NULL DEFAULT 0,
    local_gb_used INTEGER NOT NULL DEFAULT 0,
    free_ram_mb INTEGER NOT NULL DEFAULT 0,
    free_disk_gb INTEGER NOT NULL DEFAULT 0,
    current_workload INTEGER NOT NULL DEFAULT 0,
    running_vms INTEGER NOT NULL DEFAULT 0,
    disk_available_least INTEGER,
    host_ip TEXT,
    cpu_allocation_ratio REAL,
    ram_allocation_ratio REAL,
    disk_allocation_ratio REAL,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE instances (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    project_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    display_name TEXT,
    display_description TEXT,
    hostname TEXT,
    vm_state TEXT NOT NULL,
    task_state TEXT,
    power_state INTEGER NOT NULL DEFAULT 0,
    host TEXT,
    node TEXT,
    availability_zone TEXT,
    instance_type_id INTEGER,
    flavor TEXT NOT NULL,              -- JSON: the flavor as booted
    image_ref TEXT,
    key_name TEXT,
    key_data TEXT,
    user_data TEXT,
    config_drive TEXT NOT NULL DEFAULT '',
    reservation_id TEXT,
    launch_index INTEGER NOT NULL DEFAULT 0,
    access_ip_v4 TEXT,
    access_ip_v6 TEXT,
    progress INTEGER NOT NULL DEFAULT 0,
    root_device_name TEXT,
    locked INTEGER NOT NULL DEFAULT 0,
    locked_by TEXT,
    locked_reason TEXT,
    request_spec TEXT NOT NULL DEFAULT '{}', -- JSON: scheduling request (az, group, hints, retry)
    launched_at TEXT,
    terminated_at TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX instances_project ON instances (project_id, deleted);
CREATE INDEX instances_host ON instances (host, deleted);
CREATE TABLE instance_metadata (
    id INTEGER PRIMARY KEY,
    instance_uuid TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX instance_metadata_uuid ON instance_metadata (instance_uuid, deleted);
CREATE TABLE instance_system_metadata (
    id INTEGER PRIMARY KEY,
    instance_uuid TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE instance_faults (
    id INTEGER PRIMARY KEY,
    instance_uuid TEXT NOT NULL,
    code INTEGER NOT NULL,
    message TEXT,
    details TEXT,
    host TEXT,
    created_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX instance_faults_uuid ON instance_faults (instance_uuid);
CREATE TABLE instance_actions (
    id INTEGER PRIMARY KEY,
    action TEXT NOT NULL,
    instance_uuid TEXT NOT NULL,
    request_id TEXT NOT NULL,
    user_id TEXT,
    project_id TEXT,
    start_time TEXT,
    finish_time TEXT,
    message TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX instance_actions_uuid ON instance_actions (instance_uuid, request_id);
CREATE TABLE instance_actions_events (
    id INTEGER PRIMARY KEY,
    action_id INTEGER NOT NULL,
    event TEXT NOT NULL,
    start_time TEXT,
    finish_time TEXT,
    result TEXT,
    traceback TEXT,
    host TEXT,
    details TEXT,
    created_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX instance_actions_events_action ON instance_actions_events (action_id);
CREATE TABLE block_device_mapping (
    id INTEGER PRIMARY KEY,
    uuid TEXT,
    instance_uuid TEXT NOT NULL,
    source_type TEXT,
    destination_type TEXT,
    guest_format TEXT,
    device_type TEXT,
    disk_bus TEXT,
    device_name TEXT,
    boot_index INTEGER,
    volume_id TEXT,
    image_id TEXT,
    snapshot_id TEXT,
    volume_size INTEGER,
    volume_type TEXT,
    delete_on_termination INTEGER NOT NULL DEFAULT 0,
    no_device INTEGER NOT NULL DEFAULT 0,
    connection_info TEXT,
    tag TEXT,
    attachment_id TEXT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX bdm_instance ON block_device_mapping (instance_uuid, deleted);
CREATE TABLE aggregates (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE aggregate_hosts (
    aggregate_id INTEGER NOT NULL,
    host TEXT NOT NULL,
    PRIMARY KEY (aggregate_id, host)
);
CREATE TABLE aggregate_metadata (
    aggregate_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (aggregate_id, key)
);
CREATE TABLE instance_groups (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT,
    user_id TEXT,
    project_id TEXT,
    policy TEXT NOT NULL,
    rules TEXT NOT NULL DEFAULT '{}',
    created_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE instance_group_member (
    group_id INTEGER NOT NULL,
    instance_uuid TEXT NOT NULL,
    PRIMARY KEY (group_id, instance_uuid)
);
