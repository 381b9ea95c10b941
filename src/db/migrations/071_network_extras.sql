-- 071: the networking service's security groups, routers and subnet pools
-- (Neutron's table and column names: securitygroups, securitygrouprules,
-- default_security_group, routers, routerports, routerroutes, subnetpools,
-- subnetpoolprefixes). Neutron keeps the standard attributes (description,
-- created_at, updated_at, revision_number) in one standardattributes table;
-- nubo keeps them on each row, which runbook SQL reads more easily.
-- Rows reference the ports and networks of 070 by id only (no foreign key),
-- so the two migrations can be applied in any order.
CREATE TABLE securitygroups (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    stateful INTEGER NOT NULL DEFAULT 1,
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX securitygroups_project_idx ON securitygroups (project_id);

-- One default group per project; the primary key is what makes a second
-- concurrent "first use" fail instead of creating two.
CREATE TABLE default_security_group (
    project_id TEXT PRIMARY KEY,
    security_group_id TEXT NOT NULL REFERENCES securitygroups (id) ON DELETE CASCADE
);

CREATE TABLE securitygrouprules (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    security_group_id TEXT NOT NULL REFERENCES securitygroups (id) ON DELETE CASCADE,
    remote_group_id TEXT REFERENCES securitygroups (id) ON DELETE CASCADE,
    direction TEXT NOT NULL CHECK (direction IN ('ingress', 'egress')),
    ethertype TEXT NOT NULL CHECK (ethertype IN ('IPv4', 'IPv6')),
    protocol TEXT,
    port_range_min INTEGER,
    port_range_max INTEGER,
    remote_ip_prefix TEXT,
    description TEXT NOT NULL DEFAULT '',
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX securitygrouprules_sg_idx ON securitygrouprules (security_group_id);

-- gw_network_id/enable_snat: the external gateway (l3 + ext-gw-mode);
-- gw_port_id: its port (device_owner network:router_gateway), if one was made.
CREATE TABLE routers (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'ACTIVE',
    admin_state_up INTEGER NOT NULL DEFAULT 1,
    gw_network_id TEXT,
    gw_port_id TEXT,
    enable_snat INTEGER NOT NULL DEFAULT 1,
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX routers_project_idx ON routers (project_id);

-- The router's ports: port_type network:router_interface or network:router_gateway.
CREATE TABLE routerports (
    router_id TEXT NOT NULL REFERENCES routers (id) ON DELETE CASCADE,
    port_id TEXT NOT NULL PRIMARY KEY,
    port_type TEXT NOT NULL
);
CREATE INDEX routerports_router_idx ON routerports (router_id);

-- extraroute: static routes of a router.
CREATE TABLE routerroutes (
    router_id TEXT NOT NULL REFERENCES routers (id) ON DELETE CASCADE,
    destination TEXT NOT NULL,
    nexthop TEXT NOT NULL,
    PRIMARY KEY (router_id, destination, nexthop)
);

CREATE TABLE subnetpools (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    ip_version INTEGER NOT NULL,
    default_prefixlen INTEGER NOT NULL,
    min_prefixlen INTEGER NOT NULL,
    max_prefixlen INTEGER NOT NULL,
    shared INTEGER NOT NULL DEFAULT 0,
    is_default INTEGER NOT NULL DEFAULT 0,
    default_quota INTEGER,
    address_scope_id TEXT,
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE subnetpoolprefixes (
    subnetpool_id TEXT NOT NULL REFERENCES subnetpools (id) ON DELETE CASCADE,
    cidr TEXT NOT NULL,
    PRIMARY KEY (subnetpool_id, cidr)
);
