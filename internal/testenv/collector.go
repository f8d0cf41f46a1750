package testenv

import "sync"

// Collector keeps what several goroutines report (alerts, rounds) for a test to read. The
// zero Collector is empty and ready.
type Collector[T any] struct {
	mu  sync.Mutex
	all []T
}

// Add keeps v.
func (c *Collector[T]) Add(v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, v)
}

// Len is how many were kept.
func (c *Collector[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

// Since is a copy of what was kept after the first n (Since(0): all of it).
func (c *Collector[T]) Since(n int) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.all[n:]...)
}
