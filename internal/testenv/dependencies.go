package testenv

import (
	"maps"
	"sync"
)

// Dependencies records what outage trackers tell the metrics (an outage.Observer): whether
// each dependency is up, and how many operations on each failed. The zero value is ready.
type Dependencies struct {
	mu     sync.Mutex
	up     map[string]bool
	errors map[string]int
}

// DependencyUp records that the dependency name is up, or down.
func (d *Dependencies) DependencyUp(name string, up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.up == nil {
		d.up = map[string]bool{}
	}
	d.up[name] = up
}

// DependencyError records a failed operation on the dependency name.
func (d *Dependencies) DependencyError(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.errors == nil {
		d.errors = map[string]int{}
	}
	d.errors[name]++
}

// Seen is what has been recorded so far: each dependency's last up or down, and its failed
// operations.
func (d *Dependencies) Seen() (up map[string]bool, errors map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.up), maps.Clone(d.errors)
}
