-- 020_image_members: Glance's image_members table (images shared with other
-- projects) and the indexes image listing uses.
CREATE TABLE image_members (
    id INTEGER PRIMARY KEY,
    image_id TEXT NOT NULL,
    member TEXT NOT NULL,
    can_share INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    created_at TEXT,
    updated_at TEXT,
    deleted_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX image_members_image_member ON image_members (image_id, member, deleted);
CREATE INDEX images_visibility ON images (visibility, deleted);
CREATE INDEX images_owner ON images (owner, deleted);
CREATE INDEX image_properties_name ON image_properties (name, value);
