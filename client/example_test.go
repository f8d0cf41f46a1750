package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/taskcenter/taskcenter/client"
)

// Import a spreadsheet, follow it to its end, and fetch the rejected rows.
func ExampleClient_SubmitImportFile() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("TASKCENTER_URL"), os.Getenv("TASKCENTER_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.SubmitImportFile(ctx, "customers.xlsx", client.Import{Mode: "upsert"}, client.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.Wait(ctx, sub.Task.ID, client.OnUpdate(func(t *client.Task) {
		fmt.Printf("%s %d/%d\n", t.Status, t.Progress.Current, t.Progress.Total)
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status, task.Counts.Success, "imported,", task.Counts.Failed, "rejected")
	if task.Status == client.StatusPartialSuccess {
		f, _ := os.Create("rejected.xlsx")
		defer f.Close()
		if _, err := c.DownloadErrorReport(ctx, task.ID, f); err != nil {
			log.Fatal(err)
		}
	}
}

// Export customers of one city and download the file when it is ready.
func ExampleClient_SubmitExport() {
	ctx := context.Background()
	c, _ := client.New("http://localhost:8080", "demo-user-token-alice")
	sub, err := c.SubmitExport(ctx, client.Export{Type: "customers", Filter: map[string]any{"city": "Shanghai"}},
		client.SubmitOptions{IdempotencyKey: "nightly-2026-11-30"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Wait(ctx, sub.Task.ID); err != nil {
		log.Fatal(err)
	}
	f, _ := os.Create("customers.xlsx")
	defer f.Close()
	d, err := c.DownloadResult(ctx, sub.Task.ID, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", d.Size, "bytes")
}

// Iterate over every failed task, page after page.
func ExampleClient_List() {
	ctx := context.Background()
	c, _ := client.New("http://localhost:8080", "demo-user-token-alice")
	for task, err := range c.List(ctx, client.ListOptions{Status: []string{"FAILED", "TIMEOUT"}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(task.ID, task.Type, task.Error)
	}
}

// Tell an unknown task from other failures by the problem's stable code.
func ExampleProblem() {
	c, _ := client.New("http://localhost:8080", "demo-user-token-alice")
	_, err := c.Get(context.Background(), "tsk_NOSUCHTASK")
	var p *client.Problem
	if errors.As(err, &p) && p.Code == "task_not_found" {
		fmt.Println("no such task:", p.Detail)
	}
}

// A webhook receiver: verify the signature on the raw body (rejecting replays older than five
// minutes), then de-duplicate on the event id, since delivery is at least once.
func ExampleVerifySignature() {
	secret := os.Getenv("WEBHOOK_SECRET") // shown once, when the subscription was created
	seen := map[string]bool{}             // use a table with a unique key in production
	http.HandleFunc("/taskcenter", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		ev, err := client.ParseWebhook(secret, r, body, 5*time.Minute)
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if !seen[ev.ID] {
			seen[ev.ID] = true
			fmt.Println(ev.Type, ev.Task.ID, ev.Task.Status)
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx acknowledges; anything else is retried
	})
	log.Fatal(http.ListenAndServe(":9000", nil))
}
