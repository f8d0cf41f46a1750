package webhook

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// The bounds of a secret the caller chooses.
const (
	maxSecret = 200
	minSecret = 16
)

// FieldError refuses one field of a webhook's target, a subscription's or a submit's
// notify_url: Code is what the refusal is (webhook_url_not_allowed, bad_secret), Field the
// field as the caller named it, Reason why, in the catalogue's words, and Message the whole
// refusal in English.
type FieldError struct {
	Code    string
	Field   string
	Reason  msg.Message
	Message string
}

func (e *FieldError) Error() string { return e.Message }

func fieldError(code, field string, reason msg.Message) *FieldError {
	return &FieldError{Code: code, Field: field, Reason: reason, Message: field + " " + reason.English()}
}

// CheckTarget checks a webhook's URL against the policy and its secret (one is made, 256
// random bits, when the caller chose none), the fields named as the caller sent them. It
// returns the secret; a refusal is a *FieldError, a failure to decide (a lookup that could
// not finish) is returned as it is. A nil Policy allows no URL.
func (p *Policy) CheckTarget(ctx context.Context, urlField, url, secretField, secret string) (string, error) {
	if err := p.checkTargetURL(ctx, urlField, url); err != nil {
		return "", err
	}
	if secret == "" {
		return "whsec_" + strings.ToLower(rand.Text()+rand.Text()), nil
	}
	m, bad := textcheck.Problem(secret, maxSecret)
	if !bad && len(secret) < minSecret {
		m, bad = msg.New("field_error.too_short", "min", strconv.Itoa(minSecret)), true
	}
	if bad {
		return "", fieldError("bad_secret", secretField, m)
	}
	return secret, nil
}

func (p *Policy) checkTargetURL(ctx context.Context, field, url string) error {
	if url == "" {
		return fieldError("webhook_url_not_allowed", field, msg.New("row.required"))
	}
	if m, bad := textcheck.Problem(url, MaxURLLength); bad {
		return fieldError("webhook_url_not_allowed", field, m)
	}
	if p == nil {
		p, _ = NewPolicy(nil)
	}
	var na *NotAllowedError
	if err := p.CheckURL(ctx, url); errors.As(err, &na) {
		fe := fieldError("webhook_url_not_allowed", field, na.Reason)
		fe.Message = field + " cannot be used: " + na.Reason.English()
		return fe
	} else if err != nil {
		return err
	}
	return nil
}

// Notify checks a submit's notify_url and notify_secret and returns the subscription the
// task is submitted with: told of the task's endings, created by by. Nil when the submit
// asks for no notification.
func (p *Policy) Notify(ctx context.Context, n webhooks.Notify, by string) (*webhooks.NewSubscription, error) {
	if n == (webhooks.Notify{}) {
		return nil, nil
	}
	secret, err := p.CheckTarget(ctx, "notify_url", n.URL, "notify_secret", n.Secret)
	if err != nil {
		return nil, err
	}
	return &webhooks.NewSubscription{URL: n.URL, Events: TerminalEvents, Secret: secret, CreatedBy: by}, nil
}
