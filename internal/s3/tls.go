package s3

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrCABundleNoCertificate is a CA bundle's error when it holds no PEM
// certificate.
var ErrCABundleNoCertificate = errors.New("holds no PEM certificate")

// CertPool is the pool of the PEM certificates in bundle, or
// ErrCABundleNoCertificate when none parses.
func CertPool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, ErrCABundleNoCertificate
	}
	return pool, nil
}

// Certificates is the PEM of the certificates in bundle and nothing else,
// or ErrCABundleNoCertificate when none parses. The bundle is read from
// an object an ObjectStore's editor names and is copied into BucketAccess
// Secrets: a private key or anything else kept beside the certificates
// must not travel with them.
func Certificates(bundle []byte) ([]byte, error) {
	var out []byte
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			continue
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
	}
	if len(out) == 0 {
		return nil, ErrCABundleNoCertificate
	}
	return out, nil
}

// tlsConfig is the TLS of every connection to a store: the system's roots
// when cfg has no CA bundle (nil), else that bundle's certificates and no
// others. Instead of the system's, not beside them: a platform team that
// names the CA of a store says who may vouch for it, and a store's keys are
// an admin's; a public CA's certificate for the same name (a split-horizon
// DNS name, say) must not be taken for the store. A store whose admin API
// has a certificate of another CA needs both in the bundle.
func tlsConfig(cfg Config) (*tls.Config, error) {
	if len(cfg.CABundle) == 0 {
		return nil, nil
	}
	pool, err := CertPool(cfg.CABundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle %w", err)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// certificateError is the verification failure inside err if the store's
// certificate was refused (an unknown authority, another host's name, an
// expired certificate), else nil.
func certificateError(err error) error {
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) {
		return verify.Err
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return unknown
	case errors.As(err, &hostname):
		return hostname
	case errors.As(err, &invalid):
		return invalid
	}
	return nil
}
