-- Nova's quota_classes: limits per quota class (os-quota-class-sets); the
-- rows of class "default" are the defaults every project gets where it
-- has no limit of its own (DbQuotaDriver.get_defaults).
CREATE TABLE quota_classes (
    id INTEGER PRIMARY KEY,
    class_name TEXT NOT NULL,
    resource TEXT NOT NULL,
    hard_limit INTEGER NOT NULL,
    UNIQUE (class_name, resource)
);
