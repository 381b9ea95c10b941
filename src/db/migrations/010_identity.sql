-- 010_identity: what the identity module keeps beyond 001_initial.
-- token.audit_chain_id: the audit id of the token a re-scoped token was made
--   from (Keystone shows it as the second of a token's audit_ids).
-- role.options: Keystone resource options, e.g. {"immutable": true} on the
--   roles bootstrap creates.
-- project_tag: Keystone's project tags.
ALTER TABLE token ADD COLUMN audit_chain_id TEXT;
ALTER TABLE role ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
CREATE TABLE project_tag (
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (project_id, name)
);
CREATE INDEX token_user ON token (user_id);
CREATE INDEX assignment_target ON assignment (target_id);
