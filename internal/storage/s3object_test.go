package storage

import (
	"net/http"
	"testing"

	"github.com/minio/minio-go/v7"
)

// A GET says the size of the object it served: the total of its Content-Range, or its
// length when it served the whole object; a reader compares it with the size it opened.
func TestServedSize(t *testing.T) {
	for _, tc := range []struct {
		contentRange string
		length       int64
		want         int64
	}{
		{"", 2 << 20, 2 << 20},
		{"bytes 0-1048575/3145729", 1 << 20, 3145729},
		{"bytes 0-1048575/*", 1 << 20, -1},
		{"bytes 0-1048575", 1 << 20, -1},
		{"", -1, -1},
	} {
		h := http.Header{}
		if tc.contentRange != "" {
			h.Set("Content-Range", tc.contentRange)
		}
		if got := servedSize(minio.ObjectInfo{Size: tc.length}, h); got != tc.want {
			t.Errorf("Content-Range %q, length %d: served size %d, want %d", tc.contentRange, tc.length, got, tc.want)
		}
	}
}
