-- MariaDB form of ../001_initial.sql (same number; see docs/architecture.md, Database).
-- 001_initial: the tables every role shares. Table and column names follow
-- Nova, Placement, Keystone and Glance where operators query them, so runbook
-- SQL runs unchanged. Soft delete: deleted = 0 while live, = id when deleted.

-- Identity (keystone) ------------------------------------------------------
CREATE TABLE project (
    id VARCHAR(191) PRIMARY KEY,
    name VARCHAR(191) NOT NULL,
    domain_id VARCHAR(191) NOT NULL DEFAULT 'default',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    enabled BIGINT NOT NULL DEFAULT 1,
    is_domain BIGINT NOT NULL DEFAULT 0,
    parent_id VARCHAR(191),
    extra MEDIUMTEXT NOT NULL DEFAULT '{}',
    created_at MEDIUMTEXT,
    UNIQUE (domain_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE user (
    id VARCHAR(191) PRIMARY KEY,
    name VARCHAR(191) NOT NULL,
    domain_id VARCHAR(191) NOT NULL DEFAULT 'default',
    password_hash MEDIUMTEXT,
    enabled BIGINT NOT NULL DEFAULT 1,
    default_project_id VARCHAR(191),
    description MEDIUMTEXT NOT NULL DEFAULT '',
    email MEDIUMTEXT,
    extra MEDIUMTEXT NOT NULL DEFAULT '{}',
    created_at MEDIUMTEXT,
    UNIQUE (domain_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE role (
    id VARCHAR(191) PRIMARY KEY,
    name VARCHAR(191) NOT NULL UNIQUE,
    domain_id VARCHAR(191),
    description MEDIUMTEXT NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- type: UserProject (the only one used so far), UserDomain.
CREATE TABLE assignment (
    type VARCHAR(191) NOT NULL,
    actor_id VARCHAR(191) NOT NULL,
    target_id VARCHAR(191) NOT NULL,
    role_id VARCHAR(191) NOT NULL,
    PRIMARY KEY (type, actor_id, target_id, role_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- Tokens are random; only their SHA-256 is stored.
CREATE TABLE token (
    id_hash VARCHAR(191) PRIMARY KEY,
    user_id VARCHAR(191) NOT NULL,
    project_id VARCHAR(191),
    domain_id VARCHAR(191),
    issued_at DOUBLE NOT NULL,
    expires_at DOUBLE NOT NULL,
    audit_id VARCHAR(191) NOT NULL,
    methods MEDIUMTEXT NOT NULL DEFAULT '["password"]'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX token_expires ON token (expires_at);

-- Image (glance) -----------------------------------------------------------
CREATE TABLE images (
    id VARCHAR(191) PRIMARY KEY,
    name MEDIUMTEXT,
    status MEDIUMTEXT NOT NULL DEFAULT 'queued',
    visibility VARCHAR(191) NOT NULL DEFAULT 'shared',
    protected BIGINT NOT NULL DEFAULT 0,
    os_hidden BIGINT NOT NULL DEFAULT 0,
    disk_format MEDIUMTEXT,
    container_format MEDIUMTEXT,
    size BIGINT,
    virtual_size BIGINT,
    checksum MEDIUMTEXT,
    os_hash_algo MEDIUMTEXT,
    os_hash_value MEDIUMTEXT,
    min_disk BIGINT NOT NULL DEFAULT 0,
    min_ram BIGINT NOT NULL DEFAULT 0,
    owner VARCHAR(191),
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE image_properties (
    image_id VARCHAR(191) NOT NULL,
    name VARCHAR(191) NOT NULL,
    value VARCHAR(191),
    PRIMARY KEY (image_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE image_tags (
    image_id VARCHAR(191) NOT NULL,
    value VARCHAR(191) NOT NULL,
    PRIMARY KEY (image_id, value)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Placement ------------------------------------------------------------------
CREATE TABLE resource_providers (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    name VARCHAR(191) NOT NULL UNIQUE,
    generation BIGINT NOT NULL DEFAULT 0,
    root_provider_id BIGINT,
    parent_provider_id BIGINT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE resource_classes (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    name VARCHAR(191) NOT NULL UNIQUE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE inventories (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    resource_provider_id BIGINT NOT NULL,
    resource_class VARCHAR(191) NOT NULL,
    total BIGINT NOT NULL,
    reserved BIGINT NOT NULL DEFAULT 0,
    min_unit BIGINT NOT NULL DEFAULT 1,
    max_unit BIGINT NOT NULL,
    step_size BIGINT NOT NULL DEFAULT 1,
    allocation_ratio DOUBLE NOT NULL DEFAULT 1.0,
    UNIQUE (resource_provider_id, resource_class)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE consumers (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    project_id VARCHAR(191) NOT NULL,
    user_id VARCHAR(191) NOT NULL,
    consumer_type MEDIUMTEXT,
    generation BIGINT NOT NULL DEFAULT 0,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE allocations (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    resource_provider_id BIGINT NOT NULL,
    consumer_id VARCHAR(191) NOT NULL,
    resource_class VARCHAR(191) NOT NULL,
    used BIGINT NOT NULL,
    created_at MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX allocations_rp ON allocations (resource_provider_id, resource_class);
CREATE INDEX allocations_consumer ON allocations (consumer_id);
CREATE TABLE traits (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    name VARCHAR(191) NOT NULL UNIQUE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE resource_provider_traits (
    resource_provider_id BIGINT NOT NULL,
    trait_id BIGINT NOT NULL,
    PRIMARY KEY (resource_provider_id, trait_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE resource_provider_aggregates (
    resource_provider_id BIGINT NOT NULL,
    aggregate_uuid VARCHAR(191) NOT NULL,
    PRIMARY KEY (resource_provider_id, aggregate_uuid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Compute (nova) -------------------------------------------------------------
CREATE TABLE flavors (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    flavorid VARCHAR(191) NOT NULL UNIQUE,
    name VARCHAR(191) NOT NULL UNIQUE,
    memory_mb BIGINT NOT NULL,
    vcpus BIGINT NOT NULL,
    root_gb BIGINT NOT NULL DEFAULT 0,
    ephemeral_gb BIGINT NOT NULL DEFAULT 0,
    swap BIGINT NOT NULL DEFAULT 0,
    rxtx_factor DOUBLE NOT NULL DEFAULT 1.0,
    is_public BIGINT NOT NULL DEFAULT 1,
    disabled BIGINT NOT NULL DEFAULT 0,
    description MEDIUMTEXT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE flavor_extra_specs (
    flavor_id BIGINT NOT NULL,
    "key" VARCHAR(191) NOT NULL,
    value MEDIUMTEXT,
    PRIMARY KEY (flavor_id, "key")
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE flavor_projects (
    flavor_id BIGINT NOT NULL,
    project_id VARCHAR(191) NOT NULL,
    PRIMARY KEY (flavor_id, project_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE key_pairs (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    name VARCHAR(191) NOT NULL,
    user_id VARCHAR(191) NOT NULL,
    fingerprint MEDIUMTEXT NOT NULL,
    public_key MEDIUMTEXT NOT NULL,
    type MEDIUMTEXT NOT NULL DEFAULT 'ssh',
    created_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    UNIQUE (user_id, name, deleted)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE quotas (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    project_id VARCHAR(191) NOT NULL,
    user_id VARCHAR(191),
    resource VARCHAR(191) NOT NULL,
    hard_limit BIGINT NOT NULL,
    UNIQUE (project_id, user_id, resource)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE services (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    host VARCHAR(191) NOT NULL,
    "binary" VARCHAR(191) NOT NULL,
    topic MEDIUMTEXT,
    report_count BIGINT NOT NULL DEFAULT 0,
    disabled BIGINT NOT NULL DEFAULT 0,
    disabled_reason MEDIUMTEXT,
    forced_down BIGINT NOT NULL DEFAULT 0,
    last_seen_up MEDIUMTEXT,
    version BIGINT NOT NULL DEFAULT 66,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    UNIQUE (host, "binary", deleted)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE compute_nodes (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    service_id BIGINT,
    host VARCHAR(191) NOT NULL,
    hypervisor_hostname MEDIUMTEXT NOT NULL,
    hypervisor_type MEDIUMTEXT NOT NULL,
    hypervisor_version BIGINT NOT NULL,
    cpu_info MEDIUMTEXT NOT NULL DEFAULT '{}',
    vcpus BIGINT NOT NULL,
    memory_mb BIGINT NOT NULL,
    local_gb BIGINT NOT NULL,
    vcpus_used BIGINT NOT NULL DEFAULT 0,
    memory_mb_used BIGINT NOT NULL DEFAULT 0,
    local_gb_used BIGINT NOT NULL DEFAULT 0,
    free_ram_mb BIGINT NOT NULL DEFAULT 0,
    free_disk_gb BIGINT NOT NULL DEFAULT 0,
    current_workload BIGINT NOT NULL DEFAULT 0,
    running_vms BIGINT NOT NULL DEFAULT 0,
    disk_available_least BIGINT,
    host_ip MEDIUMTEXT,
    cpu_allocation_ratio DOUBLE,
    ram_allocation_ratio DOUBLE,
    disk_allocation_ratio DOUBLE,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE instances (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    project_id VARCHAR(191) NOT NULL,
    user_id VARCHAR(191) NOT NULL,
    display_name MEDIUMTEXT,
    display_description MEDIUMTEXT,
    hostname MEDIUMTEXT,
    vm_state MEDIUMTEXT NOT NULL,
    task_state MEDIUMTEXT,
    power_state BIGINT NOT NULL DEFAULT 0,
    host VARCHAR(191),
    node MEDIUMTEXT,
    availability_zone MEDIUMTEXT,
    instance_type_id BIGINT,
    flavor MEDIUMTEXT NOT NULL,              -- JSON: the flavor as booted
    image_ref MEDIUMTEXT,
    key_name MEDIUMTEXT,
    key_data MEDIUMTEXT,
    user_data MEDIUMTEXT,
    config_drive MEDIUMTEXT NOT NULL DEFAULT '',
    reservation_id VARCHAR(191),
    launch_index BIGINT NOT NULL DEFAULT 0,
    access_ip_v4 MEDIUMTEXT,
    access_ip_v6 MEDIUMTEXT,
    progress BIGINT NOT NULL DEFAULT 0,
    root_device_name MEDIUMTEXT,
    locked BIGINT NOT NULL DEFAULT 0,
    locked_by MEDIUMTEXT,
    locked_reason MEDIUMTEXT,
    request_spec MEDIUMTEXT NOT NULL DEFAULT '{}', -- JSON: scheduling request (az, group, hints, retry)
    launched_at MEDIUMTEXT,
    terminated_at MEDIUMTEXT,
    created_at VARCHAR(191),
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX instances_project ON instances (project_id, deleted);
CREATE INDEX instances_host ON instances (host, deleted);
CREATE TABLE instance_metadata (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    instance_uuid VARCHAR(191) NOT NULL,
    "key" VARCHAR(191) NOT NULL,
    value MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX instance_metadata_uuid ON instance_metadata (instance_uuid, deleted);
CREATE TABLE instance_system_metadata (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    instance_uuid VARCHAR(191) NOT NULL,
    "key" MEDIUMTEXT NOT NULL,
    value MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE instance_faults (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    instance_uuid VARCHAR(191) NOT NULL,
    code BIGINT NOT NULL,
    message MEDIUMTEXT,
    details MEDIUMTEXT,
    host MEDIUMTEXT,
    created_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX instance_faults_uuid ON instance_faults (instance_uuid);
CREATE TABLE instance_actions (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    action MEDIUMTEXT NOT NULL,
    instance_uuid VARCHAR(191) NOT NULL,
    request_id VARCHAR(191) NOT NULL,
    user_id VARCHAR(191),
    project_id VARCHAR(191),
    start_time MEDIUMTEXT,
    finish_time MEDIUMTEXT,
    message MEDIUMTEXT,
    created_at VARCHAR(191),
    updated_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX instance_actions_uuid ON instance_actions (instance_uuid, request_id);
CREATE TABLE instance_actions_events (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    action_id BIGINT NOT NULL,
    event MEDIUMTEXT NOT NULL,
    start_time MEDIUMTEXT,
    finish_time MEDIUMTEXT,
    result MEDIUMTEXT,
    traceback MEDIUMTEXT,
    host MEDIUMTEXT,
    details MEDIUMTEXT,
    created_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX instance_actions_events_action ON instance_actions_events (action_id);
CREATE TABLE block_device_mapping (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191),
    instance_uuid VARCHAR(191) NOT NULL,
    source_type MEDIUMTEXT,
    destination_type MEDIUMTEXT,
    guest_format MEDIUMTEXT,
    device_type MEDIUMTEXT,
    disk_bus MEDIUMTEXT,
    device_name MEDIUMTEXT,
    boot_index BIGINT,
    volume_id VARCHAR(191),
    image_id VARCHAR(191),
    snapshot_id VARCHAR(191),
    volume_size BIGINT,
    volume_type MEDIUMTEXT,
    delete_on_termination BIGINT NOT NULL DEFAULT 0,
    no_device BIGINT NOT NULL DEFAULT 0,
    connection_info MEDIUMTEXT,
    tag MEDIUMTEXT,
    attachment_id VARCHAR(191),
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX bdm_instance ON block_device_mapping (instance_uuid, deleted);
CREATE TABLE aggregates (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    name MEDIUMTEXT NOT NULL,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE aggregate_hosts (
    aggregate_id BIGINT NOT NULL,
    host VARCHAR(191) NOT NULL,
    PRIMARY KEY (aggregate_id, host)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE aggregate_metadata (
    aggregate_id BIGINT NOT NULL,
    "key" VARCHAR(191) NOT NULL,
    value MEDIUMTEXT,
    PRIMARY KEY (aggregate_id, "key")
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE instance_groups (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    uuid VARCHAR(191) NOT NULL UNIQUE,
    name MEDIUMTEXT,
    user_id VARCHAR(191),
    project_id VARCHAR(191),
    policy MEDIUMTEXT NOT NULL,
    rules MEDIUMTEXT NOT NULL DEFAULT '{}',
    created_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE instance_group_member (
    group_id BIGINT NOT NULL,
    instance_uuid VARCHAR(191) NOT NULL,
    PRIMARY KEY (group_id, instance_uuid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
