package webhooks_test

import (
	"testing"

	"github.com/taskcenter/taskcenter/store/storetest"
)

// The webhooks are tested through the whole store, as the dispatcher and the API use them:
// tasks move, their events reach the outbox, the fan-out turns them into deliveries. This is
// the part of store's test fixture those tests need (store/internal/storetest).

// fixture is storetest's, with the webhook steps of webhooks_test.go.
type fixture struct{ *storetest.Fixture }

func newFixture(t *testing.T) *fixture { return &fixture{storetest.New(t)} }
