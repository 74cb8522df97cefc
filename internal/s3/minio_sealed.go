package s3

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/secure-io/sio-go"
	"golang.org/x/crypto/argon2"
)

// MinIO's admin API seals the bodies that carry secrets (a new user's
// secret key; the list of users) with a key derived from the admin's
// secret key. The format, as MinIO's server reads and writes it:
//
//	salt (32 bytes) | algorithm (1 byte) | nonce (8 bytes) | sio stream
//
// where the key is argon2id(secret, salt; 1 pass, 64 MiB, 4 lanes), or,
// on a server in FIPS mode, PBKDF2-SHA256(secret, salt; 8192 rounds); and
// the stream is DARE (github.com/secure-io/sio-go) under AES-256-GCM or
// ChaCha20-Poly1305. Trellis seals with argon2id and AES-256-GCM, which
// every MinIO server reads, and opens all three.
const (
	sealSaltSize  = 32
	sealNonceSize = 8

	sealArgon2AESGCM   byte = 0x00
	sealArgon2ChaCha20 byte = 0x01
	sealPBKDF2AESGCM   byte = 0x02

	sealArgon2Time    = 1
	sealArgon2Memory  = 64 * 1024 // KiB
	sealArgon2Threads = 4
	sealPBKDF2Rounds  = 8192
)

// errSealed is an answer of the admin API that could not be opened: not
// sealed, or sealed with another secret than the driver's.
var errSealed = errors.New("the MinIO admin API's answer could not be decrypted with the admin's secret key")

// argon2Mu runs one argon2id derivation at a time: each takes 64 MiB, and
// a controller may call the driver from several workers.
var argon2Mu sync.Mutex

func sealKey(secret string, salt []byte, algorithm byte) ([]byte, error) {
	switch algorithm {
	case sealArgon2AESGCM, sealArgon2ChaCha20:
		argon2Mu.Lock()
		defer argon2Mu.Unlock()
		return argon2.IDKey([]byte(secret), salt, sealArgon2Time, sealArgon2Memory, sealArgon2Threads, 32), nil
	case sealPBKDF2AESGCM:
		return pbkdf2.Key(sha256.New, secret, salt, sealPBKDF2Rounds, 32)
	}
	return nil, fmt.Errorf("%w (unknown algorithm %#x)", errSealed, algorithm)
}

func sealStream(key []byte, algorithm byte) (*sio.Stream, error) {
	if algorithm == sealArgon2ChaCha20 {
		return sio.ChaCha20Poly1305.Stream(key)
	}
	return sio.AES_256_GCM.Stream(key)
}

// seal encrypts plaintext for the admin API with the admin's secret key.
func seal(secret string, plaintext []byte) ([]byte, error) {
	return sealWith(secret, sealArgon2AESGCM, plaintext)
}

func sealWith(secret string, algorithm byte, plaintext []byte) ([]byte, error) {
	header := make([]byte, sealSaltSize+1+sealNonceSize)
	if _, err := rand.Read(header); err != nil {
		return nil, err
	}
	header[sealSaltSize] = algorithm
	key, err := sealKey(secret, header[:sealSaltSize], algorithm)
	if err != nil {
		return nil, err
	}
	stream, err := sealStream(key, algorithm)
	if err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(header)
	w := stream.EncryptWriter(out, header[sealSaltSize+1:], nil)
	if _, err := w.Write(plaintext); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// unseal decrypts an answer of the admin API with the admin's secret key.
func unseal(secret string, sealed []byte) ([]byte, error) {
	if len(sealed) < sealSaltSize+1+sealNonceSize {
		return nil, errSealed
	}
	salt, algorithm := sealed[:sealSaltSize], sealed[sealSaltSize]
	nonce, body := sealed[sealSaltSize+1:sealSaltSize+1+sealNonceSize], sealed[sealSaltSize+1+sealNonceSize:]
	key, err := sealKey(secret, salt, algorithm)
	if err != nil {
		return nil, err
	}
	stream, err := sealStream(key, algorithm)
	if err != nil {
		return nil, err
	}
	plaintext, err := io.ReadAll(stream.DecryptReader(bytes.NewReader(body), nonce, nil))
	if err != nil {
		return nil, errSealed
	}
	return plaintext, nil
}
