-- MariaDB form of ../072_instance_info_caches.sql (same number; see docs/architecture.md, Database).
-- 072: Nova's instance_info_caches: the network_info model of each instance
-- (a JSON list, one VIF per port, as nova/network/model.py serializes it),
-- written by the conductor's networking step and read by the server views
-- ("addresses", GET /servers/{id}/ips) and the ip/ip6 list filters. Runbooks
-- read it as Nova's: SELECT network_info FROM instance_info_caches WHERE
-- instance_uuid = '<uuid>'.
CREATE TABLE instance_info_caches (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0,
    network_info MEDIUMTEXT,
    instance_uuid VARCHAR(191) NOT NULL UNIQUE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
