-- 074: floating IPs (Neutron's floatingips table: neutron/db/models/l3.py)
-- and per-project network quotas (Neutron's quotas table, named neutron_quotas
-- here: Nova's quotas table has the name).
-- floating_port_id is the floating IP's own port on the external network
-- (device_owner network:floatingip): the row goes with it, as in Neutron.
-- fixed_port_id is the associated port; when it is deleted the floating IP
-- is disassociated (Neutron's disassociate_floatingips on port delete).
CREATE TABLE floatingips (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    floating_ip_address TEXT NOT NULL,
    floating_network_id TEXT NOT NULL,
    floating_port_id TEXT NOT NULL REFERENCES ports (id) ON DELETE CASCADE,
    fixed_port_id TEXT,
    fixed_ip_address TEXT,
    router_id TEXT,
    last_known_router_id TEXT,
    status TEXT NOT NULL DEFAULT 'DOWN',
    description TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '[]',
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0,
    UNIQUE (floating_network_id, fixed_port_id, fixed_ip_address)
);
CREATE INDEX floatingips_project_idx ON floatingips (project_id);
CREATE INDEX floatingips_fixed_port_idx ON floatingips (fixed_port_id);
CREATE INDEX floatingips_router_idx ON floatingips (router_id);

CREATE TRIGGER floatingips_fixed_port_deleted AFTER DELETE ON ports
BEGIN
    UPDATE floatingips SET fixed_port_id = NULL, fixed_ip_address = NULL,
        last_known_router_id = router_id, router_id = NULL, status = 'DOWN',
        revision_number = revision_number + 1
    WHERE fixed_port_id = OLD.id;
END;

-- Per-project limits set with PUT /v2.0/quotas/{project_id}; a resource
-- without a row has the [quotas] option's limit.
CREATE TABLE neutron_quotas (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    resource TEXT NOT NULL,
    "limit" INTEGER NOT NULL,
    UNIQUE (project_id, resource)
);

-- floating-ip-port-forwarding: a protocol and external port of a floating
-- IP forwarded to an internal address and port (Neutron's portforwardings;
-- socket is "<internal ip>:<internal port>").
CREATE TABLE portforwardings (
    id TEXT PRIMARY KEY,
    floatingip_id TEXT NOT NULL REFERENCES floatingips (id) ON DELETE CASCADE,
    external_port INTEGER NOT NULL,
    internal_neutron_port_id TEXT NOT NULL REFERENCES ports (id) ON DELETE CASCADE,
    protocol TEXT NOT NULL,
    socket TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at TEXT,
    updated_at TEXT,
    revision_number INTEGER NOT NULL DEFAULT 0,
    UNIQUE (floatingip_id, external_port, protocol),
    UNIQUE (internal_neutron_port_id, socket, protocol)
);
