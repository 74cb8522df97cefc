package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// NewVersitygwAccounts manages the accounts of a versitygw through its admin
// API (`versitygw admin --help`; s3api/controllers/admin.go): PATCH requests
// signed with SigV4 like any S3 request, by an account with the admin role
// (the root account is one). adminEndpoint is where that API is served: the
// S3 endpoint itself unless versitygw runs it apart with --admin-port.
func NewVersitygwAccounts(cfg Config, adminEndpoint string) (Accounts, error) {
	if adminEndpoint == "" {
		adminEndpoint = cfg.Endpoint
	}
	u, err := url.Parse(adminEndpoint)
	if err != nil || (u.Scheme != schemeHTTP && u.Scheme != schemeHTTPS) || u.Host == "" {
		return nil, fmt.Errorf("admin endpoint %q is not an http(s) URL", adminEndpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, ErrCredentialsIncomplete
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	region := cfg.Region
	if region == "" {
		region = defaultAdminRegion
	}
	httpClient, err := adminHTTPClient(cfg, timeout)
	if err != nil {
		return nil, err
	}
	return &versitygw{
		base: strings.TrimRight(u.String(), "/"), region: region, timeout: timeout,
		access: cfg.AccessKey, secret: cfg.SecretKey, onRequest: cfg.OnRequest,
		http: httpClient,
	}, nil
}

// defaultAdminRegion signs the requests of an account driver whose Config
// names no region: the region every store without regions answers to.
const defaultAdminRegion = "us-east-1"

// adminHTTPClient is the HTTP client of an account driver: every request
// bounded by timeout, and no redirect followed. An admin API answers, it
// never redirects; a redirect would carry a signed request somewhere else.
// It trusts the roots the S3 client does (tlsConfig).
func adminHTTPClient(cfg Config, timeout time.Duration) (*http.Client, error) {
	roots, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: timeout}).DialContext
	transport.ResponseHeaderTimeout = timeout
	if roots != nil {
		transport.TLSClientConfig = roots
	}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

type versitygw struct {
	base, region   string
	access, secret string
	timeout        time.Duration
	http           *http.Client
	onRequest      func(op string)
}

// count counts one operation of the account driver (Config.OnRequest),
// however many calls of the admin API it takes.
func (v *versitygw) count(op string) {
	if v.onRequest != nil {
		v.onRequest(op)
	}
}

// The bodies of the admin API, as versitygw's auth.Account and
// auth.MutableProps encode in XML.
type vgwAccount struct {
	XMLName xml.Name `xml:"Account"`
	Access  string   `xml:"Access"`
	Secret  string   `xml:"Secret"`
	Role    string   `xml:"Role"`
}

type vgwProps struct {
	XMLName xml.Name `xml:"MutableProps"`
	Secret  string   `xml:"Secret"`
}

// vgwAccounts is the answer to list-users; secrets in it are not even read.
type vgwAccounts struct {
	Accounts []struct {
		Access string `xml:"Access"`
	} `xml:"Accounts"`
}

// roleUser is versitygw's least role: no bucket of its own to create, only
// what bucket policies and ACLs grant.
const roleUser = "user"

// IssueKey makes the account's key with a secret of Trellis': versitygw
// takes the key id and secret it is given, and the key id is the account.
func (v *versitygw) IssueKey(ctx context.Context, account string) (Key, error) {
	v.count("IssueKey")
	secret, err := newSecretKey()
	if err != nil {
		return Key{}, err
	}
	if err := v.put(ctx, account, secret); err != nil {
		return Key{}, err
	}
	return Key{AccessKeyID: account, SecretKey: secret}, nil
}

// Principal: versitygw's bucket policies name accounts by access key id.
func (v *versitygw) Principal(_ context.Context, account string) (string, error) {
	if err := validAccessKeyID(account); err != nil {
		return "", err
	}
	return account, nil
}

// KnownPrincipal is the account itself, as Principal says.
func (v *versitygw) KnownPrincipal(account string) (string, bool) {
	return account, validAccessKeyID(account) == nil
}

func (v *versitygw) put(ctx context.Context, accessKeyID, secretKey string) error {
	if err := validAccessKeyID(accessKeyID); err != nil {
		return err
	}
	body, err := xml.Marshal(vgwAccount{Access: accessKeyID, Secret: secretKey, Role: roleUser})
	if err != nil {
		return err
	}
	_, err = v.call(ctx, "/create-user", nil, body)
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || resp.Code != "XAdminUserExists" {
		return err
	}
	// Created before (and its secret lost with a crash, or replaced now):
	// set the new secret.
	body, err = xml.Marshal(vgwProps{Secret: secretKey})
	if err != nil {
		return err
	}
	_, err = v.call(ctx, "/update-user", url.Values{"access": {accessKeyID}}, body)
	return err
}

func (v *versitygw) DeleteAccount(ctx context.Context, accessKeyID string) error {
	v.count("DeleteAccount")
	if err := validAccessKeyID(accessKeyID); err != nil {
		return err
	}
	_, err := v.call(ctx, "/delete-user", url.Values{"access": {accessKeyID}}, nil)
	return err
}

func (v *versitygw) ListAccounts(ctx context.Context) ([]string, error) {
	v.count("ListAccounts")
	body, err := v.call(ctx, "/list-users", nil, nil)
	if err != nil {
		return nil, err
	}
	var list vgwAccounts
	if err := xml.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("reading the store's list of accounts: %w", err)
	}
	ids := make([]string, 0, len(list.Accounts))
	for _, a := range list.Accounts {
		ids = append(ids, a.Access)
	}
	return ids, nil
}

// maxAdminAnswer bounds what is read of an answer of the admin API.
const maxAdminAnswer = 16 << 20

// call sends one signed PATCH to the admin API and returns the answer's
// body. Errors of the store come back as minio.ErrorResponse, so Classify
// sorts them like any other store error; neither the request body (it may
// hold a secret key) nor the signed URL ever goes into an error.
func (v *versitygw) call(ctx context.Context, path string, query url.Values, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	target := v.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("admin request %s: %w", path, err)
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	req = signer.SignV4(*req, v.access, v.secret, "", v.region)
	resp, err := v.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			// The URL holds no credentials, but the cause is all that matters.
			return nil, &url.Error{Op: urlErr.Op, URL: v.base + path, Err: urlErr.Err}
		}
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer to %s: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		return nil, adminError(resp.StatusCode, answer, body)
	}
	return answer, nil
}

// adminError is the error an answer of the admin API stands for: its
// status and the store's code, which status and Events show. Nothing else
// of the answer is kept, and the code only when it is a plain identifier
// that is not part of what was sent: a store, or a proxy in front of it,
// may echo the request, and a request may hold a secret key.
func adminError(status int, answer, sent []byte) minio.ErrorResponse {
	var answered minio.ErrorResponse
	_ = xml.Unmarshal(answer, &answered)
	e := minio.ErrorResponse{StatusCode: status, Code: http.StatusText(status)}
	if plainCode(answered.Code) && !bytes.Contains(sent, []byte(answered.Code)) {
		e.Code = answered.Code
	}
	return e
}

// plainCode reports whether code looks like an S3 error code: letters and
// digits, at most 64.
func plainCode(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	for _, r := range code {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
