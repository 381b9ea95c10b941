-- MariaDB form of ../030_placement_indexes.sql (same number; see docs/architecture.md, Database).
-- 030_placement_indexes: lookups placement makes on every request.
-- Providers by tree, traits and aggregates by value (filters, deletes of
-- a trait in use), inventories by class (resource class in use), and
-- consumers by owner (GET /usages).
CREATE INDEX resource_providers_root ON resource_providers (root_provider_id);
CREATE INDEX resource_providers_parent ON resource_providers (parent_provider_id);
CREATE INDEX inventories_rc ON inventories (resource_class);
CREATE INDEX resource_provider_traits_trait ON resource_provider_traits (trait_id);
CREATE INDEX resource_provider_aggregates_agg ON resource_provider_aggregates (aggregate_uuid);
CREATE INDEX consumers_project_user ON consumers (project_id, user_id);
