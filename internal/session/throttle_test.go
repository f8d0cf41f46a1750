package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

func TestThrottleCountsPerAddressAndPerCredential(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	ctx := context.Background()
	th := NewThrottle(rd.Client, "test:throttle:", 3, time.Minute)
	blocked := func(addr, cred string) int {
		t.Helper()
		wait, err := th.Blocked(ctx, addr, cred)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}
	fail := func(addr, cred string) {
		t.Helper()
		if err := th.Failed(ctx, addr, cred); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("an address that failed N times waits, whatever it presents", func(t *testing.T) {
		for i := range 3 {
			if w := blocked("198.51.100.1", fmt.Sprint("guess-", i)); w != 0 {
				t.Fatalf("attempt %d: blocked for %d s", i+1, w)
			}
			fail("198.51.100.1", fmt.Sprint("guess-", i))
		}
		if w := blocked("198.51.100.1", "a-new-guess"); w < 59 || w > 60 {
			t.Fatalf("the address after 3 refusals: wait %d s, want the window's rest", w)
		}
		if w := blocked("198.51.100.1", ""); w == 0 {
			t.Fatal("the address with no credential is not blocked")
		}
		if w := blocked("198.51.100.2", "a-new-guess"); w != 0 {
			t.Fatalf("another address: blocked for %d s", w)
		}
	})

	// Three refusals, then one client that must wait and one that must not.
	type client struct{ addr, cred, what string }
	for _, c := range []struct {
		name          string
		refused       func(i int) (addr, cred string)
		waits, passes client
	}{
		{"a credential that failed N times waits, from any address",
			func(i int) (string, string) { return fmt.Sprint("203.0.113.", i+1), "one-token-tried-everywhere" },
			client{"203.0.113.99", "one-token-tried-everywhere", "the credential from a fresh address"},
			client{"203.0.113.99", "another-token", "another credential from that address"}},
		{"an IPv6 client counts with its /64",
			func(i int) (string, string) { return fmt.Sprintf("2001:db8:1:2::%x", i+1), fmt.Sprint("v6-guess-", i) },
			client{"2001:db8:1:2:ffff::1", "v6-guess-new", "another address of the same /64"},
			client{"2001:db8:1:3::1", "v6-guess-new", "the next /64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 3 {
				fail(c.refused(i))
			}
			if w := blocked(c.waits.addr, c.waits.cred); w == 0 {
				t.Fatalf("%s is not blocked", c.waits.what)
			}
			if w := blocked(c.passes.addr, c.passes.cred); w != 0 {
				t.Fatalf("%s: blocked for %d s", c.passes.what, w)
			}
		})
	}

	t.Run("Redis holds neither the credential nor a plain hash of it", func(t *testing.T) {
		keys, err := rd.Client.Keys(ctx, "test:throttle:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if strings.Contains(k, "guess") || strings.Contains(k, "token") {
				t.Fatalf("a key names the credential: %s", k)
			}
			if ttl := rd.Client.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute {
				t.Fatalf("key %s has TTL %s, want the window", k, ttl)
			}
		}
		keyed := NewThrottle(rd.Client, "test:throttle:", 3, time.Minute).WithKey([]byte("a deployment's own key"))
		if keyed.print("x") == th.print("x") {
			t.Fatal("the key does not change the credential's name")
		}
	})

	t.Run("the window ends", func(t *testing.T) {
		short := NewThrottle(rd.Client, "test:short:", 1, 300*time.Millisecond)
		if err := short.Failed(ctx, "192.0.2.50", "x"); err != nil {
			t.Fatal(err)
		}
		if w, _ := short.Blocked(ctx, "192.0.2.50", "y"); w != 1 {
			t.Fatalf("within the window: wait %d s, want 1 (rounded up)", w)
		}
		testenv.Eventually(t, 5*time.Second, "the window to pass", func() bool {
			w, _ := short.Blocked(ctx, "192.0.2.50", "x")
			return w == 0
		})
	})
}
