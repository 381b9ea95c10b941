-- MariaDB form of ../093_commit_markers.sql (same number; see
-- docs/architecture.md, Database).
CREATE TABLE nubo_commits (
    slot VARCHAR(64) PRIMARY KEY,
    marker CHAR(16) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
