-- An archived task's files were deleted when it was archived: its result says so, as an
-- expired one does, so every reader (detail, downloads, lists) tells the same story.
UPDATE tasks_archive SET result = result || '{"expired": true}'::jsonb
WHERE jsonb_typeof(result) = 'object' AND result ->> 'expired' IS DISTINCT FROM 'true';
