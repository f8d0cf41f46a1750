-- Why a schedule is paused when it paused itself (its last runs failed in a row), shown by the
-- API until the owner resumes it (NULL for a schedule paused by hand); and when it was last
-- resumed, so the runs before a resume no longer count towards pausing it again.
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS paused_reason text;
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS resumed_at timestamptz;
