-- 053: what `nubo doctor server --fix` changed, so that no correction is
-- made without the value it replaced being kept. One row per mapping whose
-- connection_info the doctor rewrote: the text before and after, the
-- volume's admin-metadata format before (NULL: there was none) and what came
-- of it: applied (in the database, guest not yet checked), fixed (the guest
-- came up), rolled_back (the old values were put back), rollback_failed.
CREATE TABLE doctor_fixes (
    id INTEGER PRIMARY KEY,
    instance_uuid TEXT NOT NULL,
    bdm_uuid TEXT NOT NULL,
    volume_id TEXT,
    old_connection_info TEXT,
    new_connection_info TEXT,
    old_admin_format TEXT,
    request_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    outcome TEXT NOT NULL,
    message TEXT
);
CREATE INDEX doctor_fixes_instance ON doctor_fixes (instance_uuid);
