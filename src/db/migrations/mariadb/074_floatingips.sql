-- MariaDB form of ../074_floatingips.sql (same number; see docs/architecture.md, Database).
-- 074: floating IPs (Neutron's floatingips table: neutron/db/models/l3.py)
-- and per-project network quotas (Neutron's quotas table, named neutron_quotas
-- here: Nova's quotas table has the name).
-- floating_port_id is the floating IP's own port on the external network
-- (device_owner network:floatingip): the row goes with it, as in Neutron.
-- fixed_port_id is the associated port; when it is deleted the floating IP
-- is disassociated (Neutron's disassociate_floatingips on port delete).
CREATE TABLE floatingips (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    floating_ip_address MEDIUMTEXT NOT NULL,
    floating_network_id VARCHAR(191) NOT NULL,
    floating_port_id VARCHAR(191) NOT NULL,
    fixed_port_id VARCHAR(191),
    fixed_ip_address VARCHAR(191),
    router_id VARCHAR(191),
    last_known_router_id VARCHAR(191),
    status MEDIUMTEXT NOT NULL DEFAULT 'DOWN',
    description MEDIUMTEXT NOT NULL DEFAULT '',
    tags MEDIUMTEXT NOT NULL DEFAULT '[]',
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0,
    UNIQUE (floating_network_id, fixed_port_id, fixed_ip_address),
    FOREIGN KEY (floating_port_id) REFERENCES ports (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX floatingips_project_idx ON floatingips (project_id);
CREATE INDEX floatingips_fixed_port_idx ON floatingips (fixed_port_id);
CREATE INDEX floatingips_router_idx ON floatingips (router_id);

-- (InnoDB fires no trigger for rows removed by ON DELETE CASCADE.)
CREATE TRIGGER floatingips_fixed_port_deleted AFTER DELETE ON ports FOR EACH ROW
    UPDATE floatingips SET fixed_port_id = NULL, fixed_ip_address = NULL,
        last_known_router_id = router_id, router_id = NULL, status = 'DOWN',
        revision_number = revision_number + 1
    WHERE fixed_port_id = OLD.id;

-- Per-project limits set with PUT /v2.0/quotas/{project_id}; a resource
-- without a row has the [quotas] option's limit.
CREATE TABLE neutron_quotas (
    id VARCHAR(191) PRIMARY KEY,
    project_id VARCHAR(191) NOT NULL,
    resource VARCHAR(191) NOT NULL,
    "limit" BIGINT NOT NULL,
    UNIQUE (project_id, resource)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- floating-ip-port-forwarding: a protocol and external port of a floating
-- IP forwarded to an internal address and port (Neutron's portforwardings;
-- socket is "<internal ip>:<internal port>").
CREATE TABLE portforwardings (
    id VARCHAR(191) PRIMARY KEY,
    floatingip_id VARCHAR(191) NOT NULL,
    external_port BIGINT NOT NULL,
    internal_neutron_port_id VARCHAR(191) NOT NULL,
    protocol VARCHAR(191) NOT NULL,
    socket VARCHAR(191) NOT NULL,
    description MEDIUMTEXT NOT NULL DEFAULT '',
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    revision_number BIGINT NOT NULL DEFAULT 0,
    UNIQUE (floatingip_id, external_port, protocol),
    UNIQUE (internal_neutron_port_id, socket, protocol),
    FOREIGN KEY (floatingip_id) REFERENCES floatingips (id) ON DELETE CASCADE,
    FOREIGN KEY (internal_neutron_port_id) REFERENCES ports (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
