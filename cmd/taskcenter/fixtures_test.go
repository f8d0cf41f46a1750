package main

import "testing"

// startEnv is the usual start of a test: a world of its own (newEnv with overrides) and one
// taskcenter process in it with these roles.
func startEnv(t *testing.T, overrides map[string]string, roles string) (*env, *proc) {
	t.Helper()
	e := newEnv(t, overrides)
	return e, e.start(roles)
}

// exportUnderWay submits alice's export of every customer and returns it once it is running
// and has made progress, so the test can act on it mid-way.
func (p *proc) exportUnderWay() taskJSON {
	p.t.Helper()
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	p.waitUnderWay(aliceToken, task.ID)
	return task
}

// exportingCustomers starts a process with every role over rows customers, exported 20 a
// page (long enough to act on mid-way), and returns it with alice's export of them under way.
func exportingCustomers(t *testing.T, rows int) (*env, *proc, taskJSON) {
	t.Helper()
	e := newEnv(t, map[string]string{"TASKCENTER_EXPORT_PAGE_SIZE": "20"})
	e.seedCustomers(rows)
	p := e.start("all")
	return e, p, p.exportUnderWay()
}
