package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// A task older than retention moves to the archive: it is still found by id (by its owner
// only) and counted in /api/v1/stats.
func TestArchivedTaskIsFoundByIDAndCountedInStats(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, fastCleanup, "all")
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	p.waitStatus(aliceToken, task.ID, 3*time.Minute, "SUCCESS")
	e.exec("UPDATE tasks SET finished_at = now() - interval '31 days', started_at = now() - interval '31 days' - interval '3 seconds' WHERE task_no = ?", task.ID)
	testenv.Eventually(t, 30*time.Second, "the task to be archived", func() bool {
		return e.count("SELECT count(*) FROM tasks_archive WHERE task_no = ?", task.ID) == 1
	})
	res := p.do("GET", "/api/v1/tasks/"+task.ID, aliceToken, nil)
	if res.status != http.StatusOK || !strings.Contains(string(res.body), `"archived":true`) || !strings.Contains(string(res.body), `"status":"SUCCESS"`) {
		t.Fatalf("archived lookup: %d %s", res.status, res.body)
	}
	// An archived task reads like any finished one whose files have gone: expired, 410.
	if !strings.Contains(string(res.body), `"expired":true`) || strings.Contains(string(res.body), `"result":"/api`) {
		t.Fatalf("archived task's result is not shown expired: %s", res.body)
	}
	if res := p.do("GET", "/api/v1/tasks/"+task.ID+"/result", aliceToken, nil); res.status != http.StatusGone ||
		!strings.Contains(string(res.body), "export again") {
		t.Fatalf("download of an archived task's result: %d %s, want 410 saying to export again", res.status, res.body)
	}
	if res := p.do("GET", "/api/v1/tasks/"+task.ID+"/result", bobToken, nil); res.status != http.StatusNotFound {
		t.Fatalf("bob downloads alice's archived result: %d", res.status)
	}
	if res := p.do("GET", "/api/v1/tasks/"+task.ID, bobToken, nil); res.status != http.StatusNotFound {
		t.Fatalf("bob sees alice's archived task: %d", res.status)
	}
	from := time.Now().UTC().AddDate(0, 0, -40).Format(time.DateOnly)
	var stats struct {
		Items []struct {
			Type  string `json:"type"`
			Tasks int    `json:"tasks"`
		} `json:"items"`
	}
	p.do("GET", "/api/v1/stats?from="+from+"&group_by=type", aliceToken, nil).json(t, &stats)
	if len(stats.Items) != 1 || stats.Items[0].Type != "export:customers" || stats.Items[0].Tasks != 1 {
		t.Fatalf("stats = %+v", stats.Items)
	}
	if res := p.do("GET", "/api/v1/stats?group_by=colour", aliceToken, nil); res.status != http.StatusBadRequest {
		t.Fatalf("bad group_by: %d %s", res.status, res.body)
	}
}

// Users manage recurring tasks through the API: a bad cron or time zone is refused naming the
// field, so is a schedule firing more often than schedules.min_interval (an admin may lower it
// for one schedule) and one schedule more than an owner may keep; a good schedule fires (its
// fires listed with their tasks), pausing stops it, deleting removes it, and another user
// cannot see it.
func TestSchedulesThroughTheAPI(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, map[string]string{"TASKCENTER_CLEANUP_SCHEDULE_SYNC": "1s", "TASKCENTER_SCHEDULES_MAX_PER_OWNER": "2"}, "all")
	for _, bad := range []map[string]any{
		{"type": "export:customers", "cron": "every tuesday", "params": map[string]any{}},
		{"type": "export:customers", "cron": "0 9 * * 1", "timezone": "Mars/Olympus"},
		{"type": "import:customers", "cron": "@every 1h"},
		{"type": "export:customers", "cron": "@every 1h", "params": map[string]any{"filter": map[string]any{"level": "emerald"}}},
	} {
		if res := p.do("POST", "/api/v1/schedules", aliceToken, bad); res.status != http.StatusUnprocessableEntity {
			t.Fatalf("%v: %d %s", bad, res.status, res.body)
		}
	}
	for _, c := range []struct {
		body map[string]any
		says string
	}{
		{map[string]any{"type": "export:customers", "cron": "@every 1s"}, "at most once every 5m0s (schedules.min_interval)"},
		{map[string]any{"type": "export:customers", "cron": "*/2 * * * *"}, "at most once every 5m0s"},
		{map[string]any{"type": "export:customers", "cron": "@every 2s", "min_interval": "1s"}, "only an admin may set it"},
	} {
		res := p.do("POST", "/api/v1/schedules", aliceToken, c.body)
		if res.status != http.StatusUnprocessableEntity || !strings.Contains(string(res.body), c.says) {
			t.Fatalf("%v: %d %s, want 422 saying %q", c.body, res.status, res.body, c.says)
		}
	}
	for i := range 3 {
		res := p.do("POST", "/api/v1/schedules", aliceToken, map[string]any{"type": "export:customers", "cron": "@every 1h"})
		if want := []int{http.StatusCreated, http.StatusCreated, http.StatusConflict}[i]; res.status != want ||
			(i == 2 && !strings.Contains(string(res.body), `"too_many_schedules"`)) {
			t.Fatalf("alice's schedule %d: %d %s, want %d", i+1, res.status, res.body, want)
		}
	}
	res := p.do("POST", "/api/v1/schedules", adminToken, map[string]any{"type": "export:customers", "cron": "@every 2s",
		"timezone": "Asia/Shanghai", "min_interval": "2s"})
	if res.status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	var sc struct {
		ID    string `json:"id"`
		Fires []struct {
			Task    string `json:"task"`
			Outcome string `json:"outcome"`
		} `json:"fires"`
	}
	res.json(t, &sc)
	testenv.Eventually(t, 60*time.Second, "the schedule to fire", func() bool {
		p.do("GET", "/api/v1/schedules/"+sc.ID, adminToken, nil).json(t, &sc)
		return len(sc.Fires) > 0 && sc.Fires[0].Task != ""
	})
	if res := p.do("GET", "/api/v1/schedules/"+sc.ID, bobToken, nil); res.status != http.StatusNotFound {
		t.Fatalf("bob sees the admin's schedule: %d", res.status)
	}
	if res := p.do("POST", "/api/v1/schedules/"+sc.ID+"/pause", adminToken, nil); res.status != http.StatusOK || !strings.Contains(string(res.body), `"paused":true`) {
		t.Fatalf("pause: %d %s", res.status, res.body)
	}
	if res := p.do("DELETE", "/api/v1/schedules/"+sc.ID, adminToken, nil); res.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.status, res.body)
	}
	if res := p.do("GET", "/api/v1/schedules/"+sc.ID, adminToken, nil); res.status != http.StatusNotFound {
		t.Fatalf("after delete: %d", res.status)
	}
}
