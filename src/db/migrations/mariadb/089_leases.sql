-- MariaDB form of ../089_leases.sql (same number; see docs/architecture.md,
-- Database).
CREATE TABLE nubo_leases (
    name VARCHAR(191) PRIMARY KEY,
    holder VARCHAR(255) NOT NULL,
    expires_at DOUBLE NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
ALTER TABLE instances ADD COLUMN nubo_conductor VARCHAR(255) NULL;
