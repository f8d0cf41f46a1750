package config

import (
	"strings"
	"testing"
	"time"
)

func TestStorageSettings(t *testing.T) {
	t.Parallel()
	t.Run("local is the default", func(t *testing.T) {
		t.Parallel()
		cfg, err := Load("../../configs/taskcenter.yaml", envMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		st := cfg.Storage
		if st.Backend != "local" || st.Endpoint != "127.0.0.1:7070" || st.Bucket != "taskcenter" || !st.PathStyle || !st.Presign ||
			st.PresignTTL != 5*time.Minute || st.PartSize != 16<<20 || st.AccessKey != "" {
			t.Fatalf("storage defaults = %+v", st)
		}
	})
	t.Run("s3 on a local endpoint gets the development gateway's credentials", func(t *testing.T) {
		t.Parallel()
		cfg, err := Load("../../configs/taskcenter.yaml", envMap(map[string]string{"TASKCENTER_STORAGE_BACKEND": "s3"}))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Storage.AccessKey != DevAccessKey || cfg.Storage.SecretKey != DevSecretKey {
			t.Fatalf("credentials = %q/%q, want the dev gateway's", cfg.Storage.AccessKey, cfg.Storage.SecretKey)
		}
	})
	t.Run("every field from the environment", func(t *testing.T) {
		t.Parallel()
		cfg, err := Load("../../configs/taskcenter.yaml", envMap(map[string]string{
			"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_ENDPOINT": "https://s3.example.com",
			"TASKCENTER_STORAGE_BUCKET": "tc-prod", "TASKCENTER_STORAGE_REGION": "eu-west-1",
			"TASKCENTER_STORAGE_ACCESS_KEY": "AK", "TASKCENTER_STORAGE_SECRET_KEY": "SK",
			"TASKCENTER_STORAGE_PATH_STYLE": "false", "TASKCENTER_STORAGE_TLS": "true", "TASKCENTER_STORAGE_PRESIGN": "false",
			"TASKCENTER_STORAGE_PRESIGN_TTL": "90s", "TASKCENTER_STORAGE_PRESIGN_ENDPOINT": "files.example.com",
			"TASKCENTER_STORAGE_CREATE_BUCKET": "true", "TASKCENTER_STORAGE_PART_SIZE": "8388608",
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := Storage{Backend: "s3", Endpoint: "https://s3.example.com", Bucket: "tc-prod", Region: "eu-west-1", AccessKey: "AK",
			SecretKey: "SK", TLS: true, PresignTTL: 90 * time.Second, PresignEndpoint: "files.example.com", CreateBucket: true, PartSize: 8 << 20}
		if cfg.Storage != want {
			t.Fatalf("storage = %+v\nwant      %+v", cfg.Storage, want)
		}
	})
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown backend", map[string]string{"TASKCENTER_STORAGE_BACKEND": "gcs"}, "storage.backend (TASKCENTER_STORAGE_BACKEND) must be local or s3"},
		{"remote endpoint without credentials", map[string]string{"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_ENDPOINT": "s3.example.com"},
			"set TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY"},
		{"presign ttl over 7 days", map[string]string{"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_PRESIGN_TTL": "200h"}, "storage.presign_ttl"},
		{"part too small", map[string]string{"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_PART_SIZE": "1024"}, "storage.part_size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("../../configs/taskcenter.yaml", envMap(c.env))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
	for _, c := range []struct {
		endpoint string
		local    bool
	}{{"127.0.0.1:7070", true}, {"http://localhost:9000", true}, {"[::1]:7070", true}, {"s3.example.com", false}, {"https://10.0.0.5:9000/", false}} {
		if got := (Storage{Endpoint: c.endpoint}).LocalEndpoint(); got != c.local {
			t.Errorf("LocalEndpoint(%s) = %v", c.endpoint, got)
		}
	}
}
