-- 080: nothing on SQLite. The code orders rows of tables without an integer
-- key by their insertion order, SQLite's implicit rowid (ORDER BY rowid);
-- mariadb/080_rowid_order.sql gives those tables the same column on MariaDB.
SELECT 1;
