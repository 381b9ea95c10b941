-- 085: what `nubo doctor cloud --fix` changed, one row per repaired
-- finding: the check, its subject, the action and what the action replaced
-- (undo: JSON, enough for `nubo doctor rollback <id>` to put it back), and
-- its outcome: applied, rolled_back, rollback_failed.
CREATE TABLE doctor_cloud_fixes (
    id INTEGER PRIMARY KEY,
    check_name TEXT NOT NULL,
    subject TEXT NOT NULL,
    action TEXT NOT NULL,
    undo TEXT NOT NULL,
    evidence TEXT,
    request_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    outcome TEXT NOT NULL,
    message TEXT
);
