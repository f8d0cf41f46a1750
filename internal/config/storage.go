package config

import (
	"net"
	"strings"
	"time"
)

// Storage selects where uploads, results and error reports are kept (internal/storage).
type Storage struct {
	// Backend is "local" (files under data_dir: one box, or a shared mount) or "s3" (a bucket
	// on any S3-compatible service: nodes need no shared disk). Default "local". The other
	// fields are for s3.
	Backend string `yaml:"backend"`
	// Endpoint is the S3 service's host:port; an http:// or https:// prefix sets TLS.
	// Default "127.0.0.1:7070", the Versity S3 Gateway scripts/services.sh starts.
	Endpoint string `yaml:"endpoint"`
	// Bucket holds every object. Default "taskcenter".
	Bucket string `yaml:"bucket"`
	// Region signs requests. Default "us-east-1".
	Region string `yaml:"region"`
	// AccessKey and SecretKey are the credentials. Set them in the environment
	// (TASKCENTER_STORAGE_ACCESS_KEY, TASKCENTER_STORAGE_SECRET_KEY), not in a file kept in
	// a repository. Default: none, except on a loopback endpoint, where they default to
	// DevAccessKey and DevSecretKey, the development gateway's (scripts/services.sh).
	AccessKey string `yaml:"access_key"`
	SecretKey string `yaml:"secret_key"`
	// PathStyle sends path-style requests (http://host/bucket/key), which self-hosted S3
	// services need; false lets the client choose (virtual-host style on AWS, Aliyun,
	// Google). Default true.
	PathStyle bool `yaml:"path_style"`
	// TLS speaks HTTPS to the endpoint. Default false.
	TLS bool `yaml:"tls"`
	// Presign answers result and error-report downloads with a 302 to a presigned URL, so
	// the bytes never pass through the API; false streams them through the API. Default
	// true.
	Presign bool `yaml:"presign"`
	// PresignTTL is how long a presigned URL works (1s to 7 days). Default 5m.
	PresignTTL time.Duration `yaml:"presign_ttl"`
	// PresignEndpoint is the host:port presigned URLs name, when browsers reach the S3
	// service at another address than the service does. Default: Endpoint.
	PresignEndpoint string `yaml:"presign_endpoint"`
	// CreateBucket creates the bucket at start-up when it is missing. Default false.
	CreateBucket bool `yaml:"create_bucket"`
	// PartSize is the multipart part size in bytes: the memory one streamed upload holds at
	// a time. At least 5 MiB. Default 16 MiB.
	PartSize int64 `yaml:"part_size"`
}

// defaultStorage keeps files under the data dir; the s3 fields name the development gateway.
func defaultStorage() Storage {
	return Storage{Backend: "local", Endpoint: "127.0.0.1:7070", Bucket: "taskcenter", Region: "us-east-1", PathStyle: true,
		Presign: true, PresignTTL: 5 * time.Minute, PartSize: 16 << 20}
}

// validate checks the backend, and for s3 its bucket, credentials and limits.
func (st Storage) validate(bad func(string, ...any)) {
	switch st.Backend {
	case "local":
		return
	case "s3":
	default:
		bad("storage.backend (TASKCENTER_STORAGE_BACKEND) must be local or s3, got %q", st.Backend)
		return
	}
	if st.Endpoint == "" || st.Bucket == "" {
		bad("storage.endpoint and storage.bucket (TASKCENTER_STORAGE_ENDPOINT, TASKCENTER_STORAGE_BUCKET) must be set for the s3 backend")
	}
	if st.AccessKey == "" || st.SecretKey == "" {
		bad("the s3 backend needs credentials: set TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY")
	}
	if st.PresignTTL < time.Second || st.PresignTTL > 7*24*time.Hour {
		bad("storage.presign_ttl (TASKCENTER_STORAGE_PRESIGN_TTL) must be between 1s and 168h (S3's limit), got %s", st.PresignTTL)
	}
	if st.PartSize < 5<<20 {
		bad("storage.part_size (TASKCENTER_STORAGE_PART_SIZE) must be at least 5242880 bytes (5 MiB, S3's minimum part), got %d", st.PartSize)
	}
}

// The development gateway's credentials (scripts/services.sh starts versitygw with them):
// the defaults on a loopback endpoint only.
const (
	DevAccessKey = "taskcenter-dev"
	DevSecretKey = "taskcenter-dev-secret"
)

// LocalEndpoint reports whether the storage endpoint is on this machine.
func (s Storage) LocalEndpoint() bool {
	host := s.Endpoint
	if _, rest, ok := strings.Cut(host, "://"); ok {
		host = rest
	}
	host = strings.TrimSuffix(host, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopback(strings.Trim(host, "[]"))
}
