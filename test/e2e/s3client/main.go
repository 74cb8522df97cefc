// Command s3client is the workload of the e2e suite: it reads its S3
// connection from the environment a BucketAccess Secret provides (as a pod
// with `envFrom: [{secretRef: ...}]` gets it) and writes, reads back and
// deletes one object with minio-go. It exits non-zero, with the store's
// error code and HTTP status, when any step is refused.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func main() {
	if err := run(); err != nil {
		var resp minio.ErrorResponse
		_ = errors.As(err, &resp)
		fmt.Fprintf(os.Stderr, "s3client: %v (code %q, status %d)\n", err, resp.Code, resp.StatusCode)
		os.Exit(1)
	}
}

func run() error {
	endpoint, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_S3"))
	if err != nil || endpoint.Host == "" {
		return fmt.Errorf("AWS_ENDPOINT_URL_S3 is not a URL: %q", os.Getenv("AWS_ENDPOINT_URL_S3"))
	}
	lookup := minio.BucketLookupDNS
	if os.Getenv("S3_FORCE_PATH_STYLE") == "true" {
		lookup = minio.BucketLookupPath
	}
	mc, err := minio.New(endpoint.Host, &minio.Options{
		Creds:        credentials.NewEnvAWS(), // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
		Secure:       endpoint.Scheme == "https",
		Region:       os.Getenv("AWS_REGION"),
		BucketLookup: lookup,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, key := os.Getenv("BUCKET_NAME"), "e2e/hello.txt"
	payload := []byte("written by a workload with its own key at " + time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := mc.PutObject(ctx, bucket, key, bytes.NewReader(payload), int64(len(payload)), minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("writing %s/%s: %w", bucket, key, err)
	}
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("reading %s/%s: %w", bucket, key, err)
	}
	got, err := io.ReadAll(obj)
	_ = obj.Close()
	if err != nil {
		return fmt.Errorf("reading %s/%s: %w", bucket, key, err)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("read back %q, wrote %q", got, payload)
	}
	if err := mc.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", bucket, key, err)
	}
	fmt.Printf("wrote, read back and deleted %s/%s\n", bucket, key)
	return nil
}
