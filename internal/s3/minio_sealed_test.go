package s3

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSealed: what seal writes opens with the same secret only, under each
// algorithm a MinIO server may answer with, and a changed byte anywhere
// (salt, algorithm, nonce, ciphertext) or a cut answer is refused. That it
// is MinIO's format is TestMinIOAccounts' to show: MinIO opens the sealed
// add-user body, and Trellis opens MinIO's list-users.
func TestSealed(t *testing.T) {
	g := NewWithT(t)
	plaintext := []byte(`{"secretKey":"s3cr3t","status":"enabled"}`)
	for name, algorithm := range map[string]byte{"argon2id AES-GCM": sealArgon2AESGCM, "argon2id ChaCha20": sealArgon2ChaCha20, "PBKDF2 AES-GCM": sealPBKDF2AESGCM} {
		sealed, err := sealWith("admin-secret", algorithm, plaintext)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(sealed[sealSaltSize]).To(Equal(algorithm), name)
		g.Expect(bytes.Contains(sealed, []byte("s3cr3t"))).To(BeFalse(), name)
		opened, err := unseal("admin-secret", sealed)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(opened).To(Equal(plaintext), name)

		_, err = unseal("another-secret", sealed)
		g.Expect(err).To(MatchError(errSealed), name)
		for _, i := range []int{0, sealSaltSize, sealSaltSize + 1, sealSaltSize + 1 + sealNonceSize, len(sealed) - 1} {
			changed := bytes.Clone(sealed)
			changed[i] ^= 1
			_, err = unseal("admin-secret", changed)
			g.Expect(err).To(MatchError(errSealed), "%s: byte %d changed", name, i)
		}
		_, err = unseal("admin-secret", sealed[:len(sealed)-1])
		g.Expect(err).To(MatchError(errSealed), name)
	}
	_, err := unseal("admin-secret", []byte("not sealed"))
	g.Expect(err).To(MatchError(errSealed))
	_, err = sealWith("admin-secret", 0x7f, plaintext)
	g.Expect(err).To(MatchError(errSealed))
	sealed, err := seal("admin-secret", plaintext)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sealed[sealSaltSize]).To(Equal(sealArgon2AESGCM), "what every MinIO server opens")
}
