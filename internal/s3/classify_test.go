package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
)

// Fake credentials that must never reach a status message.
const (
	fakeAccessKey = "AKIAFAKEACCESSKEY123"
	fakeSecretKey = "wJalrXUtnFEMIK7MDENGbPxRfiCYSECRETKEY"
)

// refused is the error a dial to a closed port gives.
func refused() *net.OpError {
	return &net.OpError{
		Op:   "dial",
		Net:  "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9000},
		Err:  os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}
}

// leakyURL is a request URL carrying credentials, as a careless client or
// proxy could put in an error.
var leakyURL = "http://" + fakeAccessKey + ":" + fakeSecretKey + "@127.0.0.1:9000/bucket?X-Amz-Credential=" +
	fakeAccessKey + "&X-Amz-Signature=" + fakeSecretKey

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Reason
		// msg, when set, must be contained in the message.
		msg string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "connection refused", err: refused(), want: ReasonStoreUnreachable, msg: "connection refused"},
		{
			name: "url error wrapping connection refused",
			err:  &url.Error{Op: "Get", URL: leakyURL, Err: refused()},
			want: ReasonStoreUnreachable, msg: "connection refused",
		},
		{
			name: "wrapped url error",
			err:  fmt.Errorf("listing buckets: %w", &url.Error{Op: "Get", URL: leakyURL, Err: refused()}),
			want: ReasonStoreUnreachable, msg: "connection refused",
		},
		{name: "deadline exceeded", err: context.DeadlineExceeded, want: ReasonStoreUnreachable, msg: "deadline exceeded"},
		{name: "wrapped deadline exceeded", err: fmt.Errorf("head bucket: %w", context.DeadlineExceeded), want: ReasonStoreUnreachable},
		{name: "unexpected EOF", err: io.ErrUnexpectedEOF, want: ReasonStoreUnreachable},
		{name: "AccessDenied", err: minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, want: ReasonAccessDenied, msg: "AccessDenied"},
		{name: "InvalidAccessKeyId", err: minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403}, want: ReasonAccessDenied, msg: "InvalidAccessKeyId"},
		{name: "SignatureDoesNotMatch", err: minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, want: ReasonAccessDenied, msg: "SignatureDoesNotMatch"},
		{name: "XAdminUserNotFound", err: minio.ErrorResponse{Code: "XAdminUserNotFound", StatusCode: 400}, want: ReasonAccessDenied, msg: "XAdminUserNotFound"},
		{name: "NoSuchBucket", err: minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, want: ReasonBucketMissing},
		{name: "BucketAlreadyExists", err: minio.ErrorResponse{Code: "BucketAlreadyExists", StatusCode: 409}, want: ReasonBucketNameTaken},
		{name: "InvalidBucketName", err: minio.ErrorResponse{Code: "InvalidBucketName", StatusCode: 400}, want: ReasonInvalidBucketName},
		{name: "403 without code", err: minio.ErrorResponse{StatusCode: 403}, want: ReasonAccessDenied, msg: "403"},
		{name: "502 without code", err: minio.ErrorResponse{StatusCode: 502}, want: ReasonStoreUnreachable, msg: "HTTP 502"},
		{name: "503 SlowDown", err: minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}, want: ReasonStoreUnreachable, msg: "SlowDown"},
		{name: "incomplete credentials", err: ErrCredentialsIncomplete, want: ReasonCredentialsMissing},
		{name: "wrapped incomplete credentials", err: fmt.Errorf("store x: %w", ErrCredentialsIncomplete), want: ReasonCredentialsMissing},
		{name: "probe mismatch", err: ErrProbeMismatch, want: ReasonProbeFailed},
		{name: "probe step mismatch", err: &ProbeError{Step: "comparing", Err: ErrProbeMismatch}, want: ReasonProbeFailed},
		{name: "probe step failed", err: &ProbeError{Step: "writing", Err: errors.New("quota exceeded")}, want: ReasonProbeFailed, msg: "writing the probe object: quota exceeded"},
		{
			name: "probe step refused: the store's reason wins",
			err:  &ProbeError{Step: "writing", Err: minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}},
			want: ReasonAccessDenied,
		},
		{
			name: "probe step hit an outage: the store-level back-off takes over",
			err:  &ProbeError{Step: "reading", Err: minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503}},
			want: ReasonStoreUnreachable,
		},
		{name: "a message that merely looks like a probe step", err: errors.New("writing probe object failed"), want: ReasonStoreError},
		{
			name: "other code",
			err:  minio.ErrorResponse{Code: "MalformedXML", StatusCode: 400, Message: "request for " + leakyURL},
			want: ReasonStoreError, msg: "MalformedXML",
		},
		{name: "not implemented", err: minio.ErrorResponse{Code: "NotImplemented", StatusCode: 501}, want: ReasonNotSupported, msg: "does not implement"},
		{name: "versitygw without IAM", err: minio.ErrorResponse{Code: "XAdminMethodNotSupported", StatusCode: 501}, want: ReasonNotSupported, msg: "--iam-dir"},
		{name: "not an admin", err: minio.ErrorResponse{Code: "XAdminAccessDenied", StatusCode: 403}, want: ReasonAccessDenied},
		{name: "policy refused", err: minio.ErrorResponse{Code: "MalformedPolicy", StatusCode: 400, Message: "Invalid principal in policy"}, want: ReasonInvalidRequest, msg: "Invalid principal in policy"},
		{name: "policy refused, message with a URL", err: minio.ErrorResponse{Code: "MalformedPolicy", StatusCode: 400, Message: "see " + leakyURL}, want: ReasonInvalidRequest, msg: "(MalformedPolicy)"},
		{name: "other code, 409", err: minio.ErrorResponse{Code: "BucketNotEmpty", StatusCode: 409}, want: ReasonStoreError, msg: "BucketNotEmpty"},
		{name: "plain error", err: errors.New("something odd"), want: ReasonStoreError, msg: "something odd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reason, msg := Classify(tt.err)
			g.Expect(reason).To(Equal(tt.want))
			if tt.err == nil {
				g.Expect(msg).To(BeEmpty())
				return
			}
			g.Expect(msg).NotTo(BeEmpty())
			if tt.msg != "" {
				g.Expect(msg).To(ContainSubstring(tt.msg))
			}
			g.Expect(msg).NotTo(ContainSubstring(fakeSecretKey))
			g.Expect(msg).NotTo(ContainSubstring(fakeAccessKey))
		})
	}
}

// A network error's text carries the request URL, which can carry credentials
// (userinfo, presigned query); the status message keeps only the cause.
func TestClassifyDropsTheURLOfNetworkErrors(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		cause string
	}{
		{
			name:  "refused",
			err:   &url.Error{Op: "Get", URL: leakyURL, Err: refused()},
			cause: "connection refused",
		},
		{
			name: "lookup",
			err: &url.Error{Op: "Put", URL: leakyURL, Err: &net.OpError{Op: "dial", Net: "tcp",
				Err: &net.DNSError{Err: "no such host", Name: fakeSecretKey + ".example.invalid", IsNotFound: true}}},
			cause: "no such host",
		},
		{
			name:  "timeout",
			err:   &url.Error{Op: "Head", URL: leakyURL, Err: context.DeadlineExceeded},
			cause: "context deadline exceeded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// The test is only meaningful if the raw error does leak.
			g.Expect(tt.err.Error()).To(ContainSubstring(fakeSecretKey))

			reason, msg := Classify(tt.err)

			g.Expect(reason).To(Equal(ReasonStoreUnreachable))
			g.Expect(msg).To(Equal("the object store did not answer: " + tt.cause))
			g.Expect(msg).NotTo(ContainSubstring(fakeSecretKey))
			g.Expect(msg).NotTo(ContainSubstring(fakeAccessKey))
			g.Expect(msg).NotTo(ContainSubstring("http://"))
			g.Expect(msg).NotTo(ContainSubstring("127.0.0.1"))
		})
	}
}

func TestShortNetError(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{in: `Get "http://k:s@h/": dial tcp 127.0.0.1:9: connect: connection refused`, want: "connection refused"},
		{in: "context deadline exceeded", want: "context deadline exceeded"},
		{in: "a: b", want: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			NewWithT(t).Expect(shortNetError(errors.New(tt.in))).To(Equal(tt.want))
		})
	}
}
