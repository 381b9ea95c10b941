-- MariaDB form of ../041_instance_actions_request.sql (same number).
CREATE INDEX instance_actions_request ON instance_actions (request_id);
