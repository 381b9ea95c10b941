-- MariaDB form of ../073_network_agents.sql (same number; see docs/architecture.md, Database).
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
    id VARCHAR(191) PRIMARY KEY,
    agent_type VARCHAR(191) NOT NULL,
    "binary" MEDIUMTEXT NOT NULL,
    topic MEDIUMTEXT NOT NULL,
    host VARCHAR(191) NOT NULL,
    admin_state_up BIGINT NOT NULL DEFAULT 1,
    created_at MEDIUMTEXT NOT NULL,
    started_at MEDIUMTEXT NOT NULL,
    heartbeat_timestamp MEDIUMTEXT NOT NULL,
    description MEDIUMTEXT,
    configurations MEDIUMTEXT NOT NULL DEFAULT '{}',
    resource_versions MEDIUMTEXT,
    availability_zone MEDIUMTEXT,
    "load" BIGINT NOT NULL DEFAULT 0,
    resources_synced BIGINT,
    UNIQUE (agent_type, host)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX agents_host_idx ON agents (host);

CREATE TABLE networksegments (
    id VARCHAR(191) PRIMARY KEY,
    network_id VARCHAR(191) NOT NULL,
    network_type MEDIUMTEXT NOT NULL,
    physical_network VARCHAR(191),
    segmentation_id BIGINT,
    is_dynamic BIGINT NOT NULL DEFAULT 0,
    segment_index BIGINT NOT NULL DEFAULT 0,
    name MEDIUMTEXT,
    FOREIGN KEY (network_id) REFERENCES networks (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX networksegments_network_idx ON networksegments (network_id);
-- One network per VNI, one per VLAN id on a physical network: the indexes
-- are what make two concurrent allocations of one id impossible.
-- MariaDB has no partial index: a virtual column that is NULL outside the
-- index's rows (NULLs never collide in a UNIQUE index).
ALTER TABLE networksegments
    ADD COLUMN vxlan_segmentation_id BIGINT AS
        (CASE WHEN network_type = 'vxlan' THEN segmentation_id END) VIRTUAL,
    ADD COLUMN vlan_physical_network VARCHAR(191) AS
        (CASE WHEN network_type = 'vlan' THEN physical_network END) VIRTUAL,
    ADD COLUMN vlan_segmentation_id BIGINT AS
        (CASE WHEN network_type = 'vlan' THEN segmentation_id END) VIRTUAL;
CREATE UNIQUE INDEX networksegments_vxlan_idx ON networksegments (vxlan_segmentation_id);
CREATE UNIQUE INDEX networksegments_vlan_idx
    ON networksegments (vlan_physical_network, vlan_segmentation_id);

CREATE TABLE networkdhcpagentbindings (
    network_id VARCHAR(191) NOT NULL,
    dhcp_agent_id VARCHAR(191) NOT NULL,
    PRIMARY KEY (network_id, dhcp_agent_id),
    FOREIGN KEY (network_id) REFERENCES networks (id) ON DELETE CASCADE,
    FOREIGN KEY (dhcp_agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE routerl3agentbindings (
    router_id VARCHAR(191) NOT NULL,
    l3_agent_id VARCHAR(191) NOT NULL,
    binding_index BIGINT NOT NULL DEFAULT 1,
    PRIMARY KEY (router_id, l3_agent_id),
    FOREIGN KEY (router_id) REFERENCES routers (id) ON DELETE CASCADE,
    FOREIGN KEY (l3_agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Why a port is in ERROR, as its agent reported it (update_device_list's
-- devices_failed), for the server's fault and `nubo doctor server`.
ALTER TABLE ports ADD COLUMN status_reason MEDIUMTEXT;
