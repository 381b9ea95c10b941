-- MariaDB form of ../071_network_extras.sql (same number; see docs/architecture.md, Database).
-- 071: the networking service's security groups, routers and subnet pools
-- (Neutron's table and column names: securitygroups, securitygrouprules,
-- default_security_group, routers, routerports, routerroutes, subnetpools,
-- subnetpoolprefixes). Neutron keeps the standard attributes (description,
-- created_at, updated_at, revision_number) in one standardattributes table;
-- nubo keeps them on each row, which runbook SQL reads more easily.
-- Rows reference the ports and networks of 070 by id only (no foreign key),
-- so the two migrations can be applied in any order.
CREATE TABLE securitygroups (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    stateful BIGINT NOT NULL DEFAULT 1,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX securitygroups_project_idx ON securitygroups (project_id);

-- One default group per project; the primary key is what makes a second
-- concurrent "first use" fail instead of creating two.
CREATE TABLE default_security_group (
    project_id VARCHAR(191) PRIMARY KEY,
    security_group_id VARCHAR(191) NOT NULL,
    FOREIGN KEY (security_group_id) REFERENCES securitygroups (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE securitygrouprules (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    security_group_id VARCHAR(191) NOT NULL,
    remote_group_id VARCHAR(191),
    direction MEDIUMTEXT NOT NULL CHECK (direction IN ('ingress', 'egress')),
    ethertype MEDIUMTEXT NOT NULL CHECK (ethertype IN ('IPv4', 'IPv6')),
    protocol MEDIUMTEXT,
    port_range_min BIGINT,
    port_range_max BIGINT,
    remote_ip_prefix MEDIUMTEXT,
    description MEDIUMTEXT NOT NULL DEFAULT '',
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (security_group_id) REFERENCES securitygroups (id) ON DELETE CASCADE,
    FOREIGN KEY (remote_group_id) REFERENCES securitygroups (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX securitygrouprules_sg_idx ON securitygrouprules (security_group_id);

-- gw_network_id/enable_snat: the external gateway (l3 + ext-gw-mode);
-- gw_port_id: its port (device_owner network:router_gateway), if one was made.
CREATE TABLE routers (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    status MEDIUMTEXT NOT NULL DEFAULT 'ACTIVE',
    admin_state_up BIGINT NOT NULL DEFAULT 1,
    gw_network_id VARCHAR(191),
    gw_port_id VARCHAR(191),
    enable_snat BIGINT NOT NULL DEFAULT 1,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX routers_project_idx ON routers (project_id);

-- The router's ports: port_type network:router_interface or network:router_gateway.
CREATE TABLE routerports (
    router_id VARCHAR(191) NOT NULL,
    port_id VARCHAR(191) NOT NULL PRIMARY KEY,
    port_type MEDIUMTEXT NOT NULL,
    FOREIGN KEY (router_id) REFERENCES routers (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX routerports_router_idx ON routerports (router_id);

-- extraroute: static routes of a router.
CREATE TABLE routerroutes (
    router_id VARCHAR(191) NOT NULL,
    destination VARCHAR(191) NOT NULL,
    nexthop VARCHAR(191) NOT NULL,
    PRIMARY KEY (router_id, destination, nexthop),
    FOREIGN KEY (router_id) REFERENCES routers (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE subnetpools (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    name MEDIUMTEXT NOT NULL DEFAULT '',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    ip_version BIGINT NOT NULL,
    default_prefixlen BIGINT NOT NULL,
    min_prefixlen BIGINT NOT NULL,
    max_prefixlen BIGINT NOT NULL,
    shared BIGINT NOT NULL DEFAULT 0,
    is_default BIGINT NOT NULL DEFAULT 0,
    default_quota BIGINT,
    address_scope_id VARCHAR(191),
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE subnetpoolprefixes (
    subnetpool_id VARCHAR(191) NOT NULL,
    cidr VARCHAR(191) NOT NULL,
    PRIMARY KEY (subnetpool_id, cidr),
    FOREIGN KEY (subnetpool_id) REFERENCES subnetpools (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
