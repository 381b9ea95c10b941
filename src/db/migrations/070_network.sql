-- 070: the networking service (Neutron's table and column names where an
-- operator queries them: networks, subnets, ports, ipallocations,
-- ml2_port_bindings' host/vif/vnic columns folded into ports as binding_*).
-- Lists that Neutron keeps in side tables (allocation pools, DNS servers,
-- host routes, allowed address pairs, extra DHCP options, tags) are JSON
-- text columns here. Ids are UUID strings; rows are deleted, not soft
-- deleted, as in Neutron.
CREATE TABLE networks (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'ACTIVE',
    admin_state_up INTEGER NOT NULL DEFAULT 1,
    shared INTEGER NOT NULL DEFAULT 0,
    router_external INTEGER NOT NULL DEFAULT 0,
    is_default INTEGER NOT NULL DEFAULT 0,
    mtu INTEGER NOT NULL DEFAULT 1500,
    port_security_enabled INTEGER NOT NULL DEFAULT 1,
    availability_zone_hints TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    revision_number INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX networks_project_idx ON networks (project_id);

CREATE TABLE subnets (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    network_id TEXT NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    ip_version INTEGER NOT NULL,
    cidr TEXT NOT NULL,
    gateway_ip TEXT,
    enable_dhcp INTEGER NOT NULL DEFAULT 1,
    ipv6_ra_mode TEXT,
    ipv6_address_mode TEXT,
    subnetpool_id TEXT,
    allocation_pools TEXT NOT NULL DEFAULT '[]',
    dns_nameservers TEXT NOT NULL DEFAULT '[]',
    host_routes TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    revision_number INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX subnets_network_idx ON subnets (network_id);

CREATE TABLE ports (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    network_id TEXT NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    mac_address TEXT NOT NULL,
    admin_state_up INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL DEFAULT 'DOWN',
    device_id TEXT NOT NULL DEFAULT '',
    device_owner TEXT NOT NULL DEFAULT '',
    binding_host_id TEXT NOT NULL DEFAULT '',
    binding_vnic_type TEXT NOT NULL DEFAULT 'normal',
    binding_vif_type TEXT NOT NULL DEFAULT 'unbound',
    binding_profile TEXT NOT NULL DEFAULT '{}',
    port_security_enabled INTEGER NOT NULL DEFAULT 1,
    allowed_address_pairs TEXT NOT NULL DEFAULT '[]',
    extra_dhcp_opts TEXT NOT NULL DEFAULT '[]',
    preserve_on_delete INTEGER NOT NULL DEFAULT 0,
    tags TEXT NOT NULL DEFAULT '[]',
    revision_number INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
-- A MAC is unique per network in Neutron; nubo makes it unique everywhere.
CREATE UNIQUE INDEX ports_mac_idx ON ports (mac_address);
CREATE INDEX ports_network_idx ON ports (network_id);
CREATE INDEX ports_device_idx ON ports (device_id);

-- One row per fixed IP; the unique index is what makes two concurrent
-- allocations of the same address impossible.
CREATE TABLE ipallocations (
    port_id TEXT NOT NULL REFERENCES ports (id) ON DELETE CASCADE,
    ip_address TEXT NOT NULL,
    subnet_id TEXT NOT NULL REFERENCES subnets (id) ON DELETE CASCADE,
    network_id TEXT NOT NULL,
    PRIMARY KEY (ip_address, subnet_id)
);
CREATE INDEX ipallocations_port_idx ON ipallocations (port_id);

-- Ports' security groups (the groups themselves come with 071).
CREATE TABLE securitygroupportbindings (
    port_id TEXT NOT NULL REFERENCES ports (id) ON DELETE CASCADE,
    security_group_id TEXT NOT NULL,
    PRIMARY KEY (port_id, security_group_id)
);
