-- MariaDB form of ../053_doctor.sql (same number; see docs/architecture.md, Database).
-- 053: what `nubo doctor server --fix` changed, so that no correction is
-- made without the value it replaced being kept. One row per mapping whose
-- connection_info the doctor rewrote: the text before and after, the
-- volume's admin-metadata format before (NULL: there was none) and what came
-- of it: applied (in the database, guest not yet checked), fixed (the guest
-- came up), rolled_back (the old values were put back), rollback_failed.
CREATE TABLE doctor_fixes (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    instance_uuid VARCHAR(191) NOT NULL,
    bdm_uuid VARCHAR(191) NOT NULL,
    volume_id VARCHAR(191),
    old_connection_info MEDIUMTEXT,
    new_connection_info MEDIUMTEXT,
    old_admin_format MEDIUMTEXT,
    request_id VARCHAR(191),
    created_at MEDIUMTEXT NOT NULL,
    updated_at MEDIUMTEXT,
    outcome MEDIUMTEXT NOT NULL,
    message MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX doctor_fixes_instance ON doctor_fixes (instance_uuid);
