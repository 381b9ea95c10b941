-- MariaDB form of ../050_compute_node_supported_instances.sql (same number; see docs/architecture.md, Database).
-- 050: what the compute agents report beyond 001's columns.
-- supported_instances: JSON list of [arch, hypervisor type, vm mode] triples
-- the host can run (Nova's compute_nodes.supported_instances), read by
-- ImagePropertiesFilter.
ALTER TABLE compute_nodes ADD COLUMN supported_instances MEDIUMTEXT;
CREATE INDEX services_host_binary ON services (host, "binary", deleted);
CREATE INDEX compute_nodes_host ON compute_nodes (host, deleted);
