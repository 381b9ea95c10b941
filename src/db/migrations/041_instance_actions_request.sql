-- `nubo trace <request-id>` finds a request's actions by their request ID
-- alone (the API's lookups also give the instance).
CREATE INDEX instance_actions_request ON instance_actions (request_id);
