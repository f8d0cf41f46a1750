-- An event no subscription wants is not left for the webhook fan-out (issue 15): it is marked
-- fanned out as it is inserted, so the dispatcher never locks, joins and updates it. With no
-- subscriptions (the default: webhooks.allowed_hosts is empty) that is every event, three per
-- task, each of which cost a non-HOT UPDATE of task_events.
--
-- Exactness: the check runs in a BEFORE INSERT trigger, whose query takes a fresh snapshot
-- (READ COMMITTED, volatile function). Every transition inserts its event in the statement
-- that updates the task row, after taking that row's lock, and a notify_url subscription
-- (CreateTaskSubscription) locks the task row FOR SHARE, delivers the task's events committed
-- so far itself, and commits before any later transition of the task can take the lock: so a
-- later event's check sees the subscription and the event is left for the fan-out. A user's
-- subscription hears of events committed after it exists; an event whose statement ran while
-- the subscription was being created may or may not be announced to it, as before.
CREATE FUNCTION task_events_webhooks_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.webhooks_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions w
                       WHERE w.task_id IS NULL AND w.owner = NEW.owner AND NEW.event = ANY (w.events))
       AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions w
                       WHERE w.task_id = NEW.task_id AND NEW.event = ANY (w.events)) THEN
        NEW.webhooks_at := now();
    END IF;
    RETURN NEW;
END
$$;

--bun:split

CREATE TRIGGER task_events_webhooks_due BEFORE INSERT ON task_events
    FOR EACH ROW EXECUTE FUNCTION task_events_webhooks_due();
