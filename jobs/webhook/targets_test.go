package webhook_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs/webhook"
)

// A receiver that stops answering is the receiver's outage, told apart from the service's own
// dependencies: one WARN line naming its host when it goes, one summary when it is back, its
// failed attempts counted as webhook_target errors, and no up/down series (one customer's
// dead receiver pages nobody).
func TestAnUnreachableReceiverIsOneOutageOfItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rcv := newReceiver(t)
	f.subscribe("alice", rcv.url(), webhook.TerminalEvents...)
	logs := &testenv.SyncBuffer{}
	counts := &testenv.Dependencies{} // the metrics' view of the dispatcher
	p, err := webhook.NewPolicy([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	d := webhook.New(webhook.Config{PollInterval: 50 * time.Millisecond, RetryBase: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Timeout: 2 * time.Second}, webhook.Deps{Store: f.st, Policy: p, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Observer: counts})
	d.Start()
	t.Cleanup(d.Stop)

	rcv.Stop()
	for range 3 {
		f.finish("alice")
	}
	failed := func() int {
		_, errs := counts.Seen()
		return errs["webhook_target"]
	}
	testenv.Eventually(t, 10*time.Second, "attempts failing while the receiver is down", func() bool { return failed() >= 6 })
	rcv.Start()
	testenv.Eventually(t, 20*time.Second, "every event delivered once the receiver is back", func() bool {
		got, _ := rcv.snapshot()
		return len(got) == 3
	})
	testenv.Eventually(t, 5*time.Second, "the outage's summary", func() bool { return strings.Contains(logs.String(), "is reachable again") })

	u, _ := url.Parse(rcv.url())
	out := logs.String()
	down := `"msg":"webhook_target ` + u.Host + ` is unreachable; failures are counted until it is back"`
	back := `"msg":"webhook_target ` + u.Host + ` is reachable again"`
	if strings.Count(out, down) != 1 || strings.Count(out, back) != 1 || !strings.Contains(out, `"dependency":"webhook_target"`) {
		t.Fatalf("want one line when the receiver went and one when it came back:\n%s", out)
	}
	if n := strings.Count(out, `"level":"WARN"`); n != 1 {
		t.Fatalf("%d WARN lines for one receiver's outage:\n%s", n, out)
	}
	if up, _ := counts.Seen(); len(up) != 0 {
		t.Fatalf("a receiver's outage reported dependency_up: %v", up)
	}
}
