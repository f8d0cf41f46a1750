-- Webhook deliveries go out in the order of their task's events, per subscription: a
-- delivery is not attempted while an earlier-event delivery of the same subscription and task
-- is unfinished (pending or sending), nor while an earlier event of the task is still waiting
-- for the fan-out (its delivery may not exist yet: another dispatcher's fan-out holds it).
-- Without this, each delivery retried on its own schedule and a receiver that keeps the latest
-- status could end on task.started for a finished task. See store.ClaimDeliveries.
--
-- The unfinished deliveries of one (subscription, task), in event order: the claim's "is an
-- earlier one unfinished?" is one probe here, and so are the look-ups that keep a held-back
-- delivery's due_at behind its predecessor's next attempt (insertDeliveries, RecordAttempt),
-- which keep held-back deliveries out of the claim's scan of due ones.
CREATE INDEX webhook_deliveries_task_order ON webhook_deliveries (subscription_id, task_no, event_id)
    WHERE state IN ('pending', 'sending');

--bun:split

-- A task's events not fanned out yet: the claim's "is an earlier event of the task still
-- waiting for the fan-out?" is one probe here. Only events a subscription wants are ever in
-- it (the others are marked as they are written), so with no subscriptions it costs nothing.
CREATE INDEX task_events_webhooks_pending_task ON task_events (task_no, id) WHERE webhooks_at IS NULL;
