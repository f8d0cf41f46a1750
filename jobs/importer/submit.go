package importer

import (
	"context"
	"errors"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// Notifications checks a submit's notify_url and notify_secret and makes the webhook
// subscription its task is submitted with (jobs/webhook's Policy); nil when neither is
// given.
type Notifications interface {
	Notify(ctx context.Context, n webhooks.Notify, by string) (*webhooks.NewSubscription, error)
}

// errNoNotifications is a notify_url sent to an Uploads made without Notifications.
var errNoNotifications = errors.New("importer: notify_url given but the uploads check no notifications")

// checkNotify checks n for owner before the upload is checked, so a refused URL costs no
// reading of the file and leaves no task.
func (u *Uploads) checkNotify(ctx context.Context, n webhooks.Notify, owner string) (*webhooks.NewSubscription, error) {
	if n == (webhooks.Notify{}) {
		return nil, nil
	}
	if u.notifications == nil {
		return nil, errNoNotifications
	}
	return u.notifications.Notify(ctx, n, owner)
}

// submit hands sub, with its notification ns, to the submitter: the task and its webhook are
// created together, or an earlier identical import answers with the webhook bound to it.
// The statements get the query timeout; the reads and checks before had the request's time.
func (u *Uploads) submit(ctx context.Context, sub jobs.Submission, ns *webhooks.NewSubscription, requestID string) (jobs.SubmitResult, error) {
	sub.Notify, sub.RequestID = ns, requestID
	if u.queryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.queryTimeout)
		defer cancel()
	}
	res, err := u.submitter.SubmitMany(ctx, []jobs.Submission{sub})
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	return res[0], nil
}
