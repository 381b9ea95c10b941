-- 073: the networking data plane's control side, in Neutron's table names:
-- the agents that report to the network service (one row per agent type
-- and host, as neutron's agents table: heartbeat_timestamp says whether it
-- is alive), the networks' segments (ML2's networksegments: type,
-- physical network, VLAN id or VNI), and which agent serves a network's
-- DHCP (networkdhcpagentbindings) or hosts a router (routerl3agentbindings).
-- A network without a segment row is one made before 073: it reads as a
-- "local" network with no segmentation, as before.
-- Timestamps are UTC "YYYY-MM-DD HH:MM:SS" as Neutron's agents API shows
-- them.
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    agent_type TEXT NOT NULL,
    "binary" TEXT NOT NULL,
    topic TEXT NOT NULL,
    host TEXT NOT NULL,
    admin_state_up INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_timestamp TEXT NOT NULL,
    description TEXT,
    configurations TEXT NOT NULL DEFAULT '{}',
    resource_versions TEXT,
    availability_zone TEXT,
    "load" INTEGER NOT NULL DEFAULT 0,
    resources_synced INTEGER,
    UNIQUE (agent_type, host)
);
CREATE INDEX agents_host_idx ON agents (host);

CREATE TABLE networksegments (
    id TEXT PRIMARY KEY,
    network_id TEXT NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    network_type TEXT NOT NULL,
    physical_network TEXT,
    segmentation_id INTEGER,
    is_dynamic INTEGER NOT NULL DEFAULT 0,
    segment_index INTEGER NOT NULL DEFAULT 0,
    name TEXT
);
CREATE INDEX networksegments_network_idx ON networksegments (network_id);
-- One network per VNI, one per VLAN id on a physical network: the indexes
-- are what make two concurrent allocations of one id impossible.
CREATE UNIQUE INDEX networksegments_vxlan_idx ON networksegments (segmentation_id)
    WHERE network_type = 'vxlan';
CREATE UNIQUE INDEX networksegments_vlan_idx ON networksegments (physical_network, segmentation_id)
    WHERE network_type = 'vlan';

CREATE TABLE networkdhcpagentbindings (
    network_id TEXT NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    dhcp_agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    PRIMARY KEY (network_id, dhcp_agent_id)
);

CREATE TABLE routerl3agentbindings (
    router_id TEXT NOT NULL REFERENCES routers (id) ON DELETE CASCADE,
    l3_agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    binding_index INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (router_id, l3_agent_id)
);

-- Why a port is in ERROR, as its agent reported it (update_device_list's
-- devices_failed), for the server's fault and `nubo doctor server`.
ALTER TABLE ports ADD COLUMN status_reason TEXT;
