package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyErr is an error Redis answered with.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

func TestNodeLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"a key that is not there", redis.Nil, false},
		{"a script's own error", replyErr("ERR task already exists"), false},
		{"the caller gave up", fmt.Errorf("enqueue: %w", context.Canceled), false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection closed by the node", io.EOF, true},
		{"no answer in time", fmt.Errorf("enqueue: %w", context.DeadlineExceeded), true},
		{"the cluster is down", replyErr("CLUSTERDOWN The cluster is down"), true},
		{"slots moving", replyErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"a wrapped failure", fmt.Errorf("enqueue: %w", errors.New("write: broken pipe")), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := NodeLost(c.err); got != c.want {
				t.Fatalf("NodeLost(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
