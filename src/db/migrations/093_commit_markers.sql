-- 093: one row per MariaDB pool connection (slot: <process token>-<index>)
-- holding the marker (a random token) of its last committed writing transaction, written in
-- that transaction just before its COMMIT. When the COMMIT's answer is lost
-- (the server or a Galera node killed, a front failing over), db/mariadb.c
-- reads the row on a new connection to learn whether the transaction was
-- applied, instead of failing (and having it redone) or retrying it blind.
-- Unused on SQLite.
CREATE TABLE nubo_commits (
    slot TEXT PRIMARY KEY,
    marker TEXT NOT NULL
);
