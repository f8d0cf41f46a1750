package storage

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Areas: the first segment of every key the service writes, and of the local layout.
const (
	// Uploads holds accepted uploads, named after their content: uploads/<sha256>.<format>.
	Uploads = "uploads"
	// Results holds results and error reports, named after the attempt that wrote them:
	// results/<task_no>-a<attempt>.xlsx, results/<task_no>-a<attempt>-errors.xlsx.
	Results = "results"
	// Incoming holds uploads while they arrive and are checked, before they are moved under
	// Uploads; what is left there (the API died mid-upload) is swept after cleanup.temp_ttl.
	Incoming = "incoming"
)

// AttemptPrefix is the temp-file prefix of one attempt of a task: cleanup and takeovers
// delete exactly the partial files of attempts that are dead.
func AttemptPrefix(taskNo string, attempt int) string { return fmt.Sprintf("%s-a%d", taskNo, attempt) }

// ResultKey is the key of the result an attempt writes; suffix ("", "-errors") tells the
// result from the error report.
func ResultKey(taskNo string, attempt int, suffix, ext string) string {
	return Results + "/" + AttemptPrefix(taskNo, attempt) + suffix + ext
}

// TempOwner reads the task number and attempt from a temp entry's name
// ("tsk_X-a3-123456"); attempt is 0 when the name carries none.
func TempOwner(name string) (taskNo string, attempt int) {
	taskNo, rest, _ := strings.Cut(name, "-")
	if a, _, ok := strings.Cut(rest, "-"); ok && len(a) > 1 && a[0] == 'a' {
		if n, err := strconv.Atoi(a[1:]); err == nil {
			attempt = n
		}
	}
	return taskNo, attempt
}

// ResultOwner reads the task number and attempt from a result's name or key
// ("tsk_X-a3.xlsx", "results/tsk_X-a3-errors.xlsx"); ok is false for any other name.
func ResultOwner(name string) (taskNo string, attempt int, ok bool) {
	name = path.Base(name)
	base := strings.TrimSuffix(name, path.Ext(name))
	taskNo, rest, found := strings.Cut(base, "-")
	if !found || taskNo == "" {
		return "", 0, false
	}
	a, _, _ := strings.Cut(rest, "-")
	if len(a) < 2 || a[0] != 'a' {
		return "", 0, false
	}
	n, err := strconv.Atoi(a[1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return taskNo, n, true
}
