-- MariaDB form of ../070_network.sql (same number; see docs/architecture.md, Database).
-- 070: the networking service (Neutron's table and column names where an
-- operator queries them: networks, subnets, ports, ipallocations,
-- ml2_port_bindings' host/vif/vnic columns folded into ports as binding_*).
-- Lists that Neutron keeps in side tables (allocation pools, DNS servers,
-- host routes, allowed address pairs, extra DHCP options, tags) are JSON
-- text columns here. Ids are UUID strings; rows are deleted, not soft
-- deleted, as in Neutron.
CREATE TABLE networks (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    status MEDIUMTEXT NOT NULL DEFAULT 'ACTIVE',
    admin_state_up BIGINT NOT NULL DEFAULT 1,
    shared BIGINT NOT NULL DEFAULT 0,
    router_external BIGINT NOT NULL DEFAULT 0,
    is_default BIGINT NOT NULL DEFAULT 0,
    mtu BIGINT NOT NULL DEFAULT 1500,
    port_security_enabled BIGINT NOT NULL DEFAULT 1,
    availability_zone_hints MEDIUMTEXT NOT NULL DEFAULT '[]',
    tags MEDIUMTEXT NOT NULL DEFAULT '[]',
    revision_number BIGINT NOT NULL DEFAULT 0,
    created_at MEDIUMTEXT NOT NULL,
    updated_at MEDIUMTEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX networks_project_idx ON networks (project_id);

CREATE TABLE subnets (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    network_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    ip_version BIGINT NOT NULL,
    cidr MEDIUMTEXT NOT NULL,
    gateway_ip MEDIUMTEXT,
    enable_dhcp BIGINT NOT NULL DEFAULT 1,
    ipv6_ra_mode MEDIUMTEXT,
    ipv6_address_mode MEDIUMTEXT,
    subnetpool_id VARCHAR(191),
    allocation_pools MEDIUMTEXT NOT NULL DEFAULT '[]',
    dns_nameservers MEDIUMTEXT NOT NULL DEFAULT '[]',
    host_routes MEDIUMTEXT NOT NULL DEFAULT '[]',
    tags MEDIUMTEXT NOT NULL DEFAULT '[]',
    revision_number BIGINT NOT NULL DEFAULT 0,
    created_at MEDIUMTEXT NOT NULL,
    updated_at MEDIUMTEXT NOT NULL,
    FOREIGN KEY (network_id) REFERENCES networks (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX subnets_network_idx ON subnets (network_id);

CREATE TABLE ports (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    network_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    mac_address VARCHAR(191) NOT NULL,
    admin_state_up BIGINT NOT NULL DEFAULT 1,
    status MEDIUMTEXT NOT NULL DEFAULT 'DOWN',
    device_id VARCHAR(191) NOT NULL DEFAULT '',
    device_owner MEDIUMTEXT NOT NULL DEFAULT '',
    binding_host_id VARCHAR(191) NOT NULL DEFAULT '',
    binding_vnic_type MEDIUMTEXT NOT NULL DEFAULT 'normal',
    binding_vif_type MEDIUMTEXT NOT NULL DEFAULT 'unbound',
    binding_profile MEDIUMTEXT NOT NULL DEFAULT '{}',
    port_security_enabled BIGINT NOT NULL DEFAULT 1,
    allowed_address_pairs MEDIUMTEXT NOT NULL DEFAULT '[]',
    extra_dhcp_opts MEDIUMTEXT NOT NULL DEFAULT '[]',
    preserve_on_delete BIGINT NOT NULL DEFAULT 0,
    tags MEDIUMTEXT NOT NULL DEFAULT '[]',
    revision_number BIGINT NOT NULL DEFAULT 0,
    created_at MEDIUMTEXT NOT NULL,
    updated_at MEDIUMTEXT NOT NULL,
    FOREIGN KEY (network_id) REFERENCES networks (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- A MAC is unique per network in Neutron; nubo makes it unique everywhere.
CREATE UNIQUE INDEX ports_mac_idx ON ports (mac_address);
CREATE INDEX ports_network_idx ON ports (network_id);
CREATE INDEX ports_device_idx ON ports (device_id);

-- One row per fixed IP; the unique index is what makes two concurrent
-- allocations of the same address impossible.
CREATE TABLE ipallocations (
    port_id VARCHAR(191) NOT NULL,
    ip_address VARCHAR(191) NOT NULL,
    subnet_id VARCHAR(191) NOT NULL,
    network_id VARCHAR(191) NOT NULL,
    PRIMARY KEY (ip_address, subnet_id),
    FOREIGN KEY (port_id) REFERENCES ports (id) ON DELETE CASCADE,
    FOREIGN KEY (subnet_id) REFERENCES subnets (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX ipallocations_port_idx ON ipallocations (port_id);

-- Ports' security groups (the groups themselves come with 071).
CREATE TABLE securitygroupportbindings (
    port_id VARCHAR(191) NOT NULL,
    security_group_id VARCHAR(191) NOT NULL,
    PRIMARY KEY (port_id, security_group_id),
    FOREIGN KEY (port_id) REFERENCES ports (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
