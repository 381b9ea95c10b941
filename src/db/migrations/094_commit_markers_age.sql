-- 094: when each nubo_commits row was last written, so that rows of pools
-- long gone (every process start makes new slots) can be deleted: a
-- marker is read back only within seconds of its commit
-- (nb_db_prune_commit_markers, run by the conductor's periodic lease
-- holder).
-- Unused on SQLite.
ALTER TABLE nubo_commits ADD COLUMN updated_at TEXT;
