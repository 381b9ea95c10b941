-- MariaDB form of ../085_doctor_cloud_fixes.sql (same number; see
-- docs/architecture.md, Database).
CREATE TABLE doctor_cloud_fixes (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    check_name MEDIUMTEXT NOT NULL,
    subject MEDIUMTEXT NOT NULL,
    action MEDIUMTEXT NOT NULL,
    "undo" MEDIUMTEXT NOT NULL,
    evidence MEDIUMTEXT,
    request_id VARCHAR(191),
    created_at MEDIUMTEXT NOT NULL,
    updated_at MEDIUMTEXT,
    outcome MEDIUMTEXT NOT NULL,
    message MEDIUMTEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
