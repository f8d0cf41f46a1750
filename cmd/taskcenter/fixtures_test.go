package main

import "testing"

// startEnv is the usual start of a test: a world of its own (newEnv with overrides) and one
// taskcenter process in it with these roles.
func startEnv(t *testing.T, overrides map[string]string, roles string) (*env, *proc) {
	t.Helper()
	e := newEnv(t, overrides)
	return e, e.start(roles)
}
