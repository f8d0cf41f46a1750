package every

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// The first call does not wait for an interval, and Run returns when its context ends.
func TestRunCallsAtOnceAndStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	called, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Hour, func(context.Context) { close(called) })
	}()
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("no call before the first hour-long interval")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRunCallsEveryInterval(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 5*time.Millisecond, func(context.Context) { calls.Add(1) })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if n := calls.Load(); n < 4 {
		t.Fatalf("%d calls in 5 s at a 5 ms interval", n)
	}
}
