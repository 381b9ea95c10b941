-- MariaDB form of ../010_identity.sql (same number; see docs/architecture.md, Database).
-- 010_identity: what the identity module keeps beyond 001_initial.
-- token.audit_chain_id: the audit id of the token a re-scoped token was made
--   from (Keystone shows it as the second of a token's audit_ids).
-- role.options: Keystone resource options, e.g. {"immutable": true} on the
--   roles bootstrap creates.
-- project_tag: Keystone's project tags.
ALTER TABLE token ADD COLUMN audit_chain_id VARCHAR(191);
ALTER TABLE role ADD COLUMN options MEDIUMTEXT NOT NULL DEFAULT '{}';
CREATE TABLE project_tag (
    project_id VARCHAR(191) NOT NULL,
    name VARCHAR(191) NOT NULL,
    PRIMARY KEY (project_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX token_user ON token (user_id);
CREATE INDEX assignment_target ON assignment (target_id);
