-- 072: Nova's instance_info_caches: the network_info model of each instance
-- (a JSON list, one VIF per port, as nova/network/model.py serializes it),
-- written by the conductor's networking step and read by the server views
-- ("addresses", GET /servers/{id}/ips) and the ip/ip6 list filters. Runbooks
-- read it as Nova's: SELECT network_info FROM instance_info_caches WHERE
-- instance_uuid = '<uuid>'.
CREATE TABLE instance_info_caches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    network_info TEXT,
    instance_uuid TEXT NOT NULL UNIQUE
);
