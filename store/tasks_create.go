package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// NewTask is what a submit knows about a task.
type NewTask struct {
	TaskNo string
	Type   string
	Title  string // in English
	// TitleMessage is Title as a catalogue message when the product made it; nil for a
	// submitter's own title.
	TitleMessage   *msg.Message
	Owner          string
	Queue          string
	Priority       int
	BizKey         string // empty: no idempotency key
	Params         json.RawMessage
	RequestID      string
	MaxRetry       int
	TimeoutSeconds int
	// RetryBase, MaxRuntime and StallAfter complete the policy fixed on the row (see
	// migration task_policy).
	RetryBase, MaxRuntime, StallAfter time.Duration
	// Notify, when set, is the webhook subscription the task is submitted with (its Owner is
	// the task's): it commits with the task, or neither does.
	Notify *webhooks.NewSubscription
	// Audit is who submitted it, for its audit row; nil: the audit of CreateMany's context.
	// Tasks of several requests written in one statement each carry their request's.
	Audit *audit.Origin
}

// Create inserts a PENDING task: (new) → PENDING. When a task with the same owner, type and
// biz key exists, it returns that one and created=false instead.
func (s *Tasks) Create(ctx context.Context, nt NewTask) (task *Task, created bool, err error) {
	res, err := s.CreateMany(ctx, []NewTask{nt})
	if err != nil {
		return nil, false, err
	}
	return res[0].Task, res[0].Created, nil
}

// Created is one task of CreateMany: the new task, or the existing one with the same key.
type Created struct {
	Task    *Task
	Created bool
	// Subscription is the new task's Notify subscription, committed with it.
	Subscription *webhooks.Subscription
}

// CreateMany inserts many PENDING tasks in one statement (one transaction), each with its
// events row; for a task whose owner, type and biz key already exist (in the table, or earlier
// in the same batch) it returns the existing task and Created=false. Results are in the order
// of nts.
func (s *Tasks) CreateMany(ctx context.Context, nts []NewTask) ([]Created, error) {
	n := len(nts)
	var (
		nos, types, owners, queues, keys = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		params, requests, titles         = make([]string, n), make([]string, n), make([]string, n)
		titleCodes, titleParams          = make([]string, n), make([]string, n)
		priorities, retries, timeouts    = make([]int32, n), make([]int32, n), make([]int32, n)
		retryBases, runtimes, stalls     = make([]int64, n), make([]int64, n), make([]int64, n)
		actors, vias, addrs, auditReqs   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		audits                           = make([]*audit.Origin, n)
		subNos, subURLs, subEvents       = make([]string, n), make([]string, n), make([]string, n)
		subSecrets, subBys               = make([]string, n), make([]string, n)
	)
	for i, nt := range nts {
		nos[i], types[i], owners[i], queues[i], keys[i] = nt.TaskNo, nt.Type, nt.Owner, nt.Queue, nt.BizKey
		params[i], requests[i], titles[i] = cmp.Or(string(nt.Params), "{}"), nt.RequestID, nt.Title
		if m := nt.TitleMessage; m != nil {
			p, err := json.Marshal(m.Params)
			if err != nil {
				return nil, fmt.Errorf("encode the title of task %s: %w", nt.TaskNo, err)
			}
			titleCodes[i], titleParams[i] = m.Code, string(p)
		}
		priorities[i], retries[i], timeouts[i] = int32(nt.Priority), int32(nt.MaxRetry), int32(nt.TimeoutSeconds)
		retryBases[i], runtimes[i], stalls[i] = nt.RetryBase.Milliseconds(), nt.MaxRuntime.Milliseconds(), nt.StallAfter.Milliseconds()
		if ns := nt.Notify; ns != nil {
			subNos[i], subURLs[i], subEvents[i] = pg.NewNo("whk_"), ns.URL, strings.Join(ns.Events, ",")
			subSecrets[i], subBys[i] = ns.Secret, ns.CreatedBy
		}
		audits[i] = nt.Audit
		if audits[i] == nil {
			audits[i] = audit.FromContext(ctx)
		}
		if a := audits[i]; a != nil && a.Actor != "" {
			actors[i], vias[i], addrs[i], auditReqs[i] = a.Actor, a.Via, a.ClientAddr, a.RequestID
		}
	}
	var rows []Task
	err := pg.All(ctx, s.db, s.db.DB, &rows, sqlCreateTasks,
		nos, types, owners, queues, priorities, keys, params, requests, retries, timeouts, titles, actors, vias, addrs, auditReqs,
		retryBases, runtimes, stalls, subNos, subURLs, subEvents, subSecrets, subBys, titleCodes, titleParams)
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	byNo := make(map[string]*Task, len(rows))
	for i := range rows {
		byNo[rows[i].TaskNo] = &rows[i]
	}
	out := make([]Created, n)
	for i, nt := range nts {
		if t := byNo[nt.TaskNo]; t != nil {
			out[i] = Created{Task: t, Created: true}
			if ns := nt.Notify; ns != nil {
				// What the statement inserted: now() is the task's created_at too.
				out[i].Subscription = &webhooks.Subscription{SubNo: subNos[i], Owner: t.Owner, URL: ns.URL, Events: ns.Events,
					Secret: ns.Secret, TaskID: &t.ID, CreatedBy: ns.CreatedBy, CreatedAt: t.CreatedAt}
			}
			if a := audits[i]; a != nil && a.Actor != "" {
				a.Add(1)
			}
			continue
		}
		if nt.BizKey == "" {
			return nil, fmt.Errorf("create task %s: not inserted", nt.TaskNo)
		}
		existing, err := s.FindByKey(ctx, nt.Owner, nt.Type, nt.BizKey)
		if err != nil {
			return nil, fmt.Errorf("find task with the same key: %w", err)
		}
		out[i] = Created{Task: existing}
	}
	return out, nil
}

// sqlCreateTasks inserts the tasks of the arrays $1 to $25 (see CreateMany), each with its
// subscription, events row and audit row, and returns the tasks inserted.
var sqlCreateTasks = `
		WITH v AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[],
			                     $9::int[], $10::int[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
			                     $16::bigint[], $17::bigint[], $18::bigint[], $19::text[], $20::text[], $21::text[], $22::text[],
			                     $23::text[], $24::text[], $25::text[]) WITH ORDINALITY
			AS v(task_no, type, owner, queue, priority, biz_key, params, request_id, max_retry, timeout_seconds, title,
			     actor, via, client_addr, audit_request_id, retry_base_ms, max_runtime_ms, stall_after_ms,
			     sub_no, sub_url, sub_events, sub_secret, sub_by, title_code, title_params, ord)
		), t AS (
			-- A task submitted with its subscription is bound to it from the start (see
			-- CreateTaskSubscription): its events are left for the dispatcher.
			INSERT INTO tasks (task_no, type, owner, queue, priority, biz_key, status, params, request_id,
			                   max_retry, timeout_seconds, enqueued_at, title, title_code, title_params, retry_base_ms, max_runtime_ms,
			                   stall_after_ms, webhook_bound)
			SELECT task_no, type, owner, queue, priority, NULLIF(biz_key, ''), 'PENDING', params::jsonb, NULLIF(request_id, ''),
			       max_retry, timeout_seconds, now(), title, NULLIF(title_code, ''), NULLIF(title_params, '')::jsonb, retry_base_ms,
			       max_runtime_ms, stall_after_ms, sub_url <> ''
			FROM v ORDER BY ord
			ON CONFLICT (owner, type, biz_key) WHERE biz_key IS NOT NULL DO NOTHING
			RETURNING *
		), sub AS (
			INSERT INTO webhook_subscriptions (sub_no, owner, url, events, secret, task_id, created_by)
			SELECT v.sub_no, t.owner, v.sub_url, string_to_array(v.sub_events, ','), v.sub_secret, t.id, v.sub_by
			FROM t JOIN v ON v.task_no = t.task_no WHERE v.sub_url <> ''
		), ev AS (
			` + insertEvents(eventName, `owner`, `t`) + `
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, client_addr, request_id)
			SELECT v.actor, v.via, 'task.submit', t.task_no, 'success', v.client_addr, v.audit_request_id
			FROM t JOIN v ON v.task_no = t.task_no WHERE v.actor <> ''
		)
		SELECT ` + taskColumns + ` FROM t`
