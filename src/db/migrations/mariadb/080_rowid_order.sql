-- MariaDB form of ../080_rowid_order.sql (same number; see docs/architecture.md, Database).
-- 080: SQLite's implicit rowid, which the code orders by (insertion order of
-- tables keyed by UUIDs or composite keys), as an INVISIBLE AUTO_INCREMENT
-- column: SELECT * does not return it, as on SQLite, and `ORDER BY rowid`,
-- `p.rowid` work unchanged.
ALTER TABLE aggregate_hosts ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY aggregate_hosts_rowid (rowid);
ALTER TABLE aggregate_metadata ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY aggregate_metadata_rowid (rowid);
ALTER TABLE flavor_projects ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY flavor_projects_rowid (rowid);
ALTER TABLE floatingips ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY floatingips_rowid (rowid);
ALTER TABLE image_properties ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY image_properties_rowid (rowid);
ALTER TABLE image_tags ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY image_tags_rowid (rowid);
ALTER TABLE instance_group_member ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY instance_group_member_rowid (rowid);
ALTER TABLE ipallocations ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY ipallocations_rowid (rowid);
ALTER TABLE networks ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY networks_rowid (rowid);
ALTER TABLE networksegments ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY networksegments_rowid (rowid);
ALTER TABLE portforwardings ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY portforwardings_rowid (rowid);
ALTER TABLE ports ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY ports_rowid (rowid);
ALTER TABLE routerports ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY routerports_rowid (rowid);
ALTER TABLE routerroutes ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY routerroutes_rowid (rowid);
ALTER TABLE routers ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY routers_rowid (rowid);
ALTER TABLE securitygroupportbindings ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY securitygroupportbindings_rowid (rowid);
ALTER TABLE securitygrouprules ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY securitygrouprules_rowid (rowid);
ALTER TABLE securitygroups ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY securitygroups_rowid (rowid);
ALTER TABLE subnetpools ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY subnetpools_rowid (rowid);
ALTER TABLE subnets ADD COLUMN rowid BIGINT NOT NULL AUTO_INCREMENT INVISIBLE, ADD UNIQUE KEY subnets_rowid (rowid);
