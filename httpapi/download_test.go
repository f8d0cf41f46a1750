package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

// s3Store is a store config on a private S3 gateway; presign says whether downloads redirect.
func s3Store(t *testing.T, presign bool) (storage.Config, *testenv.S3) {
	t.Helper()
	gw := testenv.NewS3(t)
	return storage.Config{Backend: storage.BackendS3, Endpoint: gw.Endpoint, Bucket: "downloads", Region: gw.Region,
		AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, Presign: presign, CreateBucket: true,
		PresignTTL: time.Minute}, gw
}

// Downloads on each backend: the local data dir and s3 without presigning stream the object
// through the API; s3 with presigning answers 302 to a short-lived URL of the gateway, which a
// plain client follows to the same bytes and name. A file that is gone answers 410 either way,
// and every download leaves its audit row.
func TestDownloadsOnEachBackend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		backend  string
		presign  bool
		redirect bool
	}{
		{"local", storage.BackendLocal, false, false},
		{"s3 presigned", storage.BackendS3, true, true},
		{"s3 streamed", storage.BackendS3, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sc := storage.Config{}
			var gw *testenv.S3
			if c.backend == storage.BackendS3 {
				sc, gw = s3Store(t, c.presign)
			}
			e := newAPIOn(t, sc)
			soon := time.Now().Add(time.Hour)
			export := e.finishedExport(&soon)
			imp := e.finishedImport(&soon)
			for _, d := range []struct {
				path, body, name string
			}{
				{"/api/v1/tasks/" + export.TaskNo + "/result", "PK fake xlsx", "customers.xlsx"},
				{"/api/v1/tasks/" + imp.TaskNo + "/error-report", "PK fake report", "errors.xlsx"},
			} {
				rec := e.call("GET", d.path, aliceToken, nil)
				var body []byte
				var disposition string
				if c.redirect {
					loc := rec.Header().Get("Location")
					u, err := url.Parse(loc)
					if rec.Code != http.StatusFound || err != nil || u.Host != gw.Endpoint || rec.Header().Get("Cache-Control") != "no-store" {
						t.Fatalf("%s: %d Location %q Cache-Control %q, want 302 to the gateway, no-store", d.path, rec.Code, loc, rec.Header().Get("Cache-Control"))
					}
					if !strings.Contains(u.RawQuery, "X-Amz-Expires=60") || !strings.Contains(u.RawQuery, "X-Amz-Signature=") {
						t.Fatalf("%s: the URL is not presigned for the configured minute: %s", d.path, loc)
					}
					resp, err := http.Get(loc) // no credentials: the signature is the permission
					if err != nil {
						t.Fatal(err)
					}
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: the presigned URL answered %d %s", d.path, resp.StatusCode, body)
					}
					disposition = resp.Header.Get("Content-Disposition")
				} else {
					if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "private, no-store" {
						t.Fatalf("%s: %d %s (Cache-Control %q), want the file streamed", d.path, rec.Code, rec.Body, rec.Header().Get("Cache-Control"))
					}
					body, disposition = rec.Body.Bytes(), rec.Header().Get("Content-Disposition")
				}
				if string(body) != d.body || disposition != storage.ContentDisposition(d.name) {
					t.Fatalf("%s: %q as %q, want %q as %q", d.path, body, disposition, d.body, storage.ContentDisposition(d.name))
				}
			}
			// Downloads are audited as before, a redirect as a success.
			for _, action := range []string{"task.download_result", "task.download_error_report"} {
				rows := e.auditRows("action=" + action)
				if len(rows) != 1 || rows[0].Outcome != "success" || rows[0].Actor != "alice" {
					t.Fatalf("audit rows of %s: %+v", action, rows)
				}
			}
			// The object gone while the row still points at it (deleted by hand, or a
			// bucket lifecycle rule): 410, never a link to nothing.
			if err := e.files.Delete(context.Background(), storage.Results+"/"+export.TaskNo+".xlsx"); err != nil {
				t.Fatal(err)
			}
			rec := e.call("GET", "/api/v1/tasks/"+export.TaskNo+"/result", aliceToken, nil)
			if p := problemOf(t, rec); rec.Code != http.StatusGone || p.Code != "result_expired" {
				t.Fatalf("download of a deleted object: %d %+v, want 410", rec.Code, p)
			}
			// Expired and cleaned up: the 410 rules are the backend's too.
			e.expireResult(imp)
			e.cleanupExpires(imp)
			rec = e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/error-report", aliceToken, nil)
			if p := problemOf(t, rec); rec.Code != http.StatusGone || p.Code != "report_expired" {
				t.Fatalf("report after cleanup: %d %+v", rec.Code, p)
			}
		})
	}
}
