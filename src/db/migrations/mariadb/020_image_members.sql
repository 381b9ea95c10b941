-- MariaDB form of ../020_image_members.sql (same number; see docs/architecture.md, Database).
-- 020_image_members: Glance's image_members table (images shared with other
-- projects) and the indexes image listing uses.
CREATE TABLE image_members (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    image_id VARCHAR(191) NOT NULL,
    member VARCHAR(191) NOT NULL,
    can_share BIGINT NOT NULL DEFAULT 0,
    status MEDIUMTEXT NOT NULL DEFAULT 'pending',
    created_at MEDIUMTEXT,
    updated_at MEDIUMTEXT,
    deleted_at MEDIUMTEXT,
    deleted BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE UNIQUE INDEX image_members_image_member ON image_members (image_id, member, deleted);
CREATE INDEX images_visibility ON images (visibility, deleted);
CREATE INDEX images_owner ON images (owner, deleted);
CREATE INDEX image_properties_name ON image_properties (name, value);
