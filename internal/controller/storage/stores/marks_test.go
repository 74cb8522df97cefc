package stores

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestAccessKeyNames(t *testing.T) {
	g := NewWithT(t)
	a, b := AccountName("store-1", "uid-1", 1), AccountName("store-1", "uid-1", 2)
	g.Expect(a).To(HavePrefix(AccountPrefix("store-1", "uid-1")))
	g.Expect(b).To(HavePrefix(AccountPrefix("store-1", "uid-1")))
	g.Expect(a).To(HavePrefix(StoreKeyPrefix("store-1")))
	g.Expect(a).NotTo(Equal(b))
	g.Expect(AccountName("store-1", "uid-1", 10)).NotTo(HavePrefix(AccountName("store-1", "uid-1", 1)+"V"), "version 1's prefix is not version 10's")
	g.Expect(AccountPrefix("store-1", "uid-2")).NotTo(Equal(AccountPrefix("store-1", "uid-1")))
	g.Expect(a).To(MatchRegexp(`^[A-Z0-9]{16,128}$`), "letters and digits only: valid in SigV4 scopes and policies")
	g.Expect(AccountName("store-1", "uid-1", 1)).To(Equal(a), "derived, not random: found again after a crash")

	// Another ObjectStore (of this cluster or another, maybe on the same
	// store) issues the same access other ids, with another mark.
	other := AccountName("store-2", "uid-1", 1)
	g.Expect(other).NotTo(Equal(a))
	g.Expect(other).NotTo(HavePrefix(StoreKeyPrefix("store-1")))
	g.Expect(StoreKeyPrefix("store-2")).NotTo(Equal(StoreKeyPrefix("store-1")))

	// KeyOwner reads back whose key an id is, for its own store's ids only.
	for id, want := range map[string]string{
		a:                                        GrantID("uid-1"),
		AccountName("store-1", "uid-9", 1234):    GrantID("uid-9"),
		other:                                    "",
		AccountPrefix("store-1", "uid-1"):        "",
		AccountPrefix("store-1", "uid-1") + "1x": "",
		AccountPrefix("store-1", "uid-1") + "01": "",
		AccountPrefix("store-1", "uid-1") + "-1": "",
		StoreKeyPrefix("store-1") + "ABCDEFGHIJKLMNOPQRSTV1":                 "",
		StoreKeyPrefix("store-1") + strings.ToLower(GrantID("uid-1")) + "V1": "",
		"TRELLIS" + strings.ToUpper(GrantID("uid-1")) + "V1":                 "",
		"SOMEONEELSE0000000": "",
	} {
		owner, ok := KeyOwner(StoreKeyPrefix("store-1"), id)
		g.Expect(ok).To(Equal(want != ""), id)
		g.Expect(owner).To(Equal(want), id)
	}

}
