package storage

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/taskcenter/taskcenter/internal/config"
)

// smallPut is how much of an upload of unknown size Put reads ahead: an object that ends
// within it goes in one request instead of a three-request multipart upload.
const smallPut = 1 << 20

// S3 keeps objects in one bucket of an S3-compatible service, through minio-go.
type S3 struct {
	scratch
	client    *minio.Client
	core      minio.Core
	presigner *minio.Client // client for Config.PresignEndpoint; client otherwise
	bucket    string
	endpoint  string // host:port, for messages
	partSize  uint64
	presign   bool
	ttl       time.Duration
}

var _ Store = (*S3)(nil)

// endpointHost splits an optional scheme off an endpoint; the scheme, when present, decides TLS.
func endpointHost(endpoint string, tls bool, what string) (host string, secure bool, err error) {
	host, secure = endpoint, tls
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http":
			secure = false
		case "https":
			secure = true
		default:
			return "", false, fmt.Errorf("storage.s3: %s %q: scheme must be http or https", what, endpoint)
		}
		host = rest
	}
	host = strings.TrimSuffix(host, "/")
	if host == "" || strings.ContainsAny(host, "/?#@ ") {
		return "", false, fmt.Errorf("storage.s3: %s %q must be host:port (with an optional http:// or https://), no path", what, endpoint)
	}
	return host, secure, nil
}

func newS3(ctx context.Context, cfg Config, localRoot string) (*S3, error) {
	sc, err := newScratch(localRoot)
	if err != nil {
		return nil, err
	}
	d := config.Default().Storage // the defaults' one home
	cfg.Endpoint = cmp.Or(cfg.Endpoint, d.Endpoint)
	cfg.Bucket = cmp.Or(cfg.Bucket, d.Bucket)
	cfg.Region = cmp.Or(cfg.Region, d.Region)
	cfg.PresignTTL = cmp.Or(cfg.PresignTTL, d.PresignTTL)
	cfg.PartSize = cmp.Or(cfg.PartSize, d.PartSize)
	switch {
	case cfg.AccessKey == "" || cfg.SecretKey == "":
		return nil, errors.New("storage.s3: no credentials: set TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY")
	case cfg.PartSize < MinPartSize:
		return nil, fmt.Errorf("storage.s3: part size %d is below S3's minimum of %d bytes (5 MiB)", cfg.PartSize, MinPartSize)
	case cfg.PresignTTL < time.Second || cfg.PresignTTL > maxPresignTTL:
		return nil, fmt.Errorf("storage.s3: presign TTL %s must be between 1s and 7 days", cfg.PresignTTL)
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("storage.s3: bucket %q: %w (set TASKCENTER_STORAGE_BUCKET)", cfg.Bucket, err)
	}
	host, secure, err := endpointHost(cfg.Endpoint, cfg.TLS, "endpoint")
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	opts := func(secure bool) *minio.Options {
		o := &minio.Options{
			Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
			Secure:       secure,
			Region:       cfg.Region, // set, so minio-go never asks the server for the bucket's location
			BucketLookup: lookup,
		}
		if cfg.Health != nil {
			if base, err := minio.DefaultTransport(secure); err == nil {
				o.Transport = healthTransport{base: base, health: cfg.Health}
			}
		}
		return o
	}
	client, err := minio.New(host, opts(secure))
	if err != nil {
		return nil, fmt.Errorf("storage.s3: endpoint %s: %w", host, err)
	}
	presigner := client
	if cfg.PresignEndpoint != "" {
		phost, psecure, err := endpointHost(cfg.PresignEndpoint, secure, "presign endpoint")
		if err != nil {
			return nil, err
		}
		if presigner, err = minio.New(phost, opts(psecure)); err != nil {
			return nil, fmt.Errorf("storage.s3: presign endpoint %s: %w", phost, err)
		}
	}
	s := &S3{
		scratch:   sc,
		client:    client,
		core:      minio.Core{Client: client},
		presigner: presigner,
		bucket:    cfg.Bucket,
		endpoint:  host,
		partSize:  uint64(cfg.PartSize),
		presign:   cfg.Presign,
		ttl:       cfg.PresignTTL,
	}
	if err := s.connect(ctx, secure, cfg.CreateBucket, cfg.Region); err != nil {
		return nil, err
	}
	return s, nil
}

// connect checks, in the order a user would fix them, that the endpoint answers, that it
// speaks the expected protocol, that the credentials are accepted and that the bucket
// exists, creating it when allowed.
func (s *S3) connect(ctx context.Context, secure, create bool, region string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	addr := s.endpoint
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, map[bool]string{false: "80", true: "443"}[secure])
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("storage.s3: endpoint %s unreachable: %w; start it with `TASKCENTER_STORAGE_BACKEND=s3 scripts/services.sh up` (or `scripts/services.sh s3`), or set TASKCENTER_STORAGE_ENDPOINT", s.endpoint, err)
	}
	conn.Close()
	exists, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.explain(err, secure)
	}
	if exists {
		return nil
	}
	if !create {
		return fmt.Errorf("storage.s3: bucket %q does not exist at %s: create it (scripts/services.sh s3 does), or allow the service to with storage.create_bucket", s.bucket, s.endpoint)
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if code := errCode(err); code == minio.BucketAlreadyOwnedByYou {
		return nil // another replica created it first
	}
	if err != nil {
		return fmt.Errorf("storage.s3: create bucket %q at %s: %w", s.bucket, s.endpoint, s.explain(err, secure))
	}
	return nil
}

// explain turns a start-up failure into what to do about it.
func (s *S3) explain(err error, secure bool) error {
	var er minio.ErrorResponse
	switch {
	case errors.As(err, &er) && (er.Code == minio.InvalidAccessKeyID || er.Code == minio.SignatureDoesNotMatch || er.StatusCode == http.StatusForbidden):
		return fmt.Errorf("storage.s3: %s refused the credentials (%s): check TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY", s.endpoint, cmp.Or(er.Code, er.Message, err.Error()))
	case secure && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("storage.s3: %s speaks plain HTTP: turn storage.tls off (TASKCENTER_STORAGE_TLS=false): %w", s.endpoint, err)
	case !secure && (strings.Contains(err.Error(), "malformed HTTP response") || strings.Contains(err.Error(), "400 Bad Request") && strings.Contains(err.Error(), "HTTPS")):
		return fmt.Errorf("storage.s3: %s expects TLS: turn storage.tls on (TASKCENTER_STORAGE_TLS=true): %w", s.endpoint, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("storage.s3: %s accepted a connection but did not answer in time; is it an S3 service? %w", s.endpoint, err)
	}
	return fmt.Errorf("storage.s3: %s: %w", s.endpoint, err)
}

// errCode is the S3 error code of err, or "".
func errCode(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

// unreachable reports whether err means the S3 service was not reached or failed to answer —
// a network error, a timeout, a connection cut mid-answer, a 5xx (SlowDown included) — told
// by the error's type, as opposed to an answer that refuses (a 4xx).
func unreachable(err error) bool {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode >= http.StatusInternalServerError || er.Code == "SlowDown" || er.Code == "ServiceUnavailable"
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; the service said nothing
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// healthTransport tells the health how each request to the S3 service went.
type healthTransport struct {
	base   http.RoundTripper
	health Health
}

func (t healthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	switch {
	case err != nil && errors.Is(err, context.Canceled):
	case err != nil:
		t.health.Fail(err)
	case res.StatusCode >= http.StatusInternalServerError:
		t.health.Fail(fmt.Errorf("%s %s: %s", req.Method, req.URL.Host, res.Status))
	default:
		t.health.OK()
	}
	return res, err
}

// s3Err wraps an operation's error, mapping S3's answers to the package's sentinels.
func (s *S3) s3Err(op, key string, err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == minio.NoSuchKey || er.StatusCode == http.StatusNotFound && er.Code != minio.NoSuchBucket:
			return fmt.Errorf("storage: %s %s: %w", op, key, ErrNotExist)
		case er.Code == minio.PreconditionFailed || er.StatusCode == http.StatusPreconditionFailed:
			return fmt.Errorf("storage: %s %s: %w", op, key, ErrChanged)
		case er.Code == minio.NoSuchBucket:
			return fmt.Errorf("storage: %s %s: bucket %q is gone from %s: %w", op, key, s.bucket, s.endpoint, err)
		}
	}
	if unreachable(err) {
		return fmt.Errorf("storage: %s %s: %w at %s: %w", op, key, ErrUnavailable, s.endpoint, err)
	}
	return fmt.Errorf("storage: %s %s: %w", op, key, err)
}

// Backend implements Store.
func (s *S3) Backend() string { return BackendS3 }

// Bucket is the bucket objects live in.
func (s *S3) Bucket() string { return s.bucket }

// Put implements Store. An upload of unknown size holds at most one part in memory.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("storage: %w", err)
	}
	if size < 0 {
		buf := make([]byte, smallPut)
		n, err := io.ReadFull(ctxReader{ctx: ctx, r: r}, buf)
		switch {
		case err == nil:
			r = io.MultiReader(bytes.NewReader(buf), r)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			r, size = bytes.NewReader(buf[:n]), int64(n)
		default:
			return Info{}, fmt.Errorf("storage: put %s: %w", key, err) // reading the caller's reader failed
		}
	}
	return s.put(ctx, key, ctxReader{ctx: ctx, r: r}, size, contentType)
}

func (s *S3) put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	contentType = cmp.Or(contentType, contentTypeOf(key))
	ui, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{
		ContentType: contentType,
		PartSize:    s.partSize,
	})
	if err != nil {
		return Info{}, s.s3Err("put", key, err)
	}
	if size >= 0 && ui.Size != size {
		// minio-go reads exactly size bytes; a shorter reader fails above. Belt and braces.
		s.client.RemoveObject(context.WithoutCancel(ctx), s.bucket, key, minio.RemoveObjectOptions{}) //nolint:errcheck // best effort
		return Info{}, fmt.Errorf("storage: put %s: stored %d of %d bytes", key, ui.Size, size)
	}
	mod := ui.LastModified
	if mod.IsZero() {
		mod = time.Now()
	}
	return Info{Key: key, Size: ui.Size, ModTime: mod, ContentType: contentType}, nil
}

// Commit implements Store: the finished temp file is uploaded (parts read in parallel with
// ReadAt, no part buffered in memory) and then removed.
func (s *S3) Commit(ctx context.Context, tmp *os.File, key, contentType string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("storage: %w", err)
	}
	if !s.ownsTemp(tmp.Name()) {
		return Info{}, fmt.Errorf("storage: commit %s: %s was not made by CreateTemp", key, tmp.Name())
	}
	fi, err := tmp.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("storage: commit %s: %w", key, err)
	}
	info, err := s.put(ctx, key, io.NewSectionReader(tmp, 0, fi.Size()), fi.Size(), contentType)
	if err != nil {
		return Info{}, err
	}
	Discard(tmp)
	return info, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, fmt.Errorf("storage: %w", err)
	}
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.s3Err("stat", key, err)
	}
	return Info{Key: key, Size: oi.Size, ModTime: oi.LastModified, ContentType: oi.ContentType}, nil
}

// Open implements Store. The object is pinned to the version Open saw (its ETag): reads
// after an overwrite fail with ErrChanged instead of mixing two versions.
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	if err := ValidKey(key); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return nil, s.s3Err("open", key, err)
	}
	return &s3Object{ctx: ctx, s: s, key: key, etag: oi.ETag, size: oi.Size}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(s.s3Err("delete", key, err), ErrNotExist) {
		return s.s3Err("delete", key, err)
	}
	return nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string, olderThan time.Time, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return s.s3Err("list", fmt.Sprintf("%q", prefix), oi.Err)
		}
		if strings.HasSuffix(oi.Key, "/") || !olderThan.IsZero() && !oi.LastModified.Before(olderThan) {
			continue // a directory marker, or too young
		}
		if err := fn(Info{Key: oi.Key, Size: oi.Size, ModTime: oi.LastModified, ContentType: oi.ContentType}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// AbortIncomplete implements Store: it pages through the bucket's multipart uploads under
// prefix (ListMultipartUploads) and aborts each one initiated before olderThan, by key and
// upload ID, so a younger upload of the same key (one still in progress) is left alone.
func (s *S3) AbortIncomplete(ctx context.Context, prefix string, olderThan time.Time, limit int) (int, error) {
	if err := validPrefix(prefix); err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	n := 0
	keyMarker, idMarker := "", ""
	for {
		res, err := s.core.ListMultipartUploads(ctx, s.bucket, prefix, keyMarker, idMarker, "", 1000)
		if err != nil {
			return n, s.s3Err("list incomplete uploads", fmt.Sprintf("%q", prefix), err)
		}
		for _, u := range res.Uploads {
			if !olderThan.IsZero() && (u.Initiated.IsZero() || !u.Initiated.Before(olderThan)) {
				continue // still in progress, or may be: a service that gives no time is never guessed at
			}
			if limit > 0 && n >= limit {
				return n, nil
			}
			err := s.core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID)
			if err != nil && errCode(err) != minio.NoSuchUpload { // NoSuchUpload: completed or aborted meanwhile
				return n, s.s3Err("abort incomplete upload", u.Key, err)
			}
			if err == nil {
				n++
			}
		}
		if !res.IsTruncated || res.NextKeyMarker == "" && res.NextUploadIDMarker == "" {
			return n, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

// Presign implements Store.
func (s *S3) Presign(ctx context.Context, key, filename string, ttl time.Duration) (string, bool, error) {
	if err := ValidKey(key); err != nil {
		return "", false, fmt.Errorf("storage: %w", err)
	}
	if !s.presign {
		return "", false, nil
	}
	ttl = cmp.Or(ttl, s.ttl)
	if ttl < time.Second || ttl > maxPresignTTL {
		return "", false, fmt.Errorf("storage: presign %s: TTL %s must be between 1s and 7 days", key, ttl)
	}
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", ContentDisposition(filename))
	}
	u, err := s.presigner.PresignedGetObject(ctx, s.bucket, key, ttl, params)
	if err != nil {
		return "", false, s.s3Err("presign", key, err)
	}
	return u.String(), true, nil
}

// maxCopySize is the largest object S3 copies in one request.
const maxCopySize = 5 << 30

// Move implements Store: a server-side copy, then the delete of src.
func (s *S3) Move(ctx context.Context, src, dst string) error {
	if err := ValidKey(src); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := ValidKey(dst); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	oi, err := s.client.StatObject(ctx, s.bucket, src, minio.StatObjectOptions{})
	if err != nil {
		return s.s3Err("move", src, err)
	}
	if oi.Size > maxCopySize {
		return fmt.Errorf("storage: move %s: %d bytes is over the 5 GiB an S3 copy takes", src, oi.Size)
	}
	// Pinned to the version just seen: a src replaced meanwhile fails instead of moving
	// another object.
	_, err = s.client.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.bucket, Object: dst},
		minio.CopySrcOptions{Bucket: s.bucket, Object: src, MatchETag: oi.ETag})
	if err != nil {
		return s.s3Err("move", src, err)
	}
	if err := s.Delete(ctx, src); err != nil {
		return fmt.Errorf("storage: move %s: copied to %s, but: %w", src, dst, err)
	}
	return nil
}

// SpoolLocal implements Store: one streaming GET into a local file.
func (s *S3) SpoolLocal(ctx context.Context, key, dir string) (*os.File, error) {
	return s.spool(ctx, s.Open, key, dir)
}

// Ping implements Store.
func (s *S3) Ping(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		if unreachable(err) {
			return fmt.Errorf("storage.s3: %w at %s: %w", ErrUnavailable, s.endpoint, err)
		}
		return fmt.Errorf("storage.s3: %s: %w", s.endpoint, err)
	}
	if !ok {
		return fmt.Errorf("storage.s3: bucket %q is gone from %s", s.bucket, s.endpoint)
	}
	return nil
}
