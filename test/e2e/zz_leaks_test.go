//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestZZNoSecretLeaks greps what the manager wrote (its log), and what users
// can read (Events and the status of every Trellis object), for the S3 keys
// and the bucket-event token. It lives in the last file so it runs after the
// other tests generated activity.
func TestZZNoSecretLeaks(t *testing.T) {
	creds, err := os.ReadFile(filepath.Join(root, ".dev", cluster+"-s3", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{eventsToken}
	for _, line := range strings.Split(string(creds), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == "AWS_SECRET_ACCESS_KEY" {
			secrets = append(secrets, v)
		}
	}
	var logs []byte
	for _, l := range managerLogs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, b...)
	}
	events, err := kubectl("get", "events", "-A", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	objects, err := kubectl("get", "markdownviews,storagebuckets,objectstores,tenants", "-A", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("secret %q too short to grep for", s)
		}
		for name, text := range map[string]string{"manager log": string(logs), "Events": events, "object status": objects} {
			if strings.Contains(text, s) {
				t.Errorf("a secret value appears in the %s", name)
			}
		}
	}
}
