-- Finished deliveries (delivered or dead) are deleted with their attempts after the
-- webhooks' retention; this index serves that sweep.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE state IN ('delivered', 'dead');
