-- MariaDB form of ../094_commit_markers_age.sql (same number; see
-- docs/architecture.md, Database). Set by the server on every write of
-- the row (the upsert always changes the marker), so the commit path is
-- the same with or without the column.
ALTER TABLE nubo_commits
    ADD COLUMN updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
        ON UPDATE CURRENT_TIMESTAMP;
