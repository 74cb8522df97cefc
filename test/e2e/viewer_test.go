//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// xssMarkdown tries every usual way to run script from Markdown.
const xssMarkdown = `# Hostile

<script>document.title='pwned-script'</script>
<img src=x onerror="document.title='pwned-img'">
<svg onload="document.title='pwned-svg'"></svg>
<iframe src="javascript:parent.document.title='pwned-iframe'"></iframe>

[click](javascript:document.title='pwned-link')
![img](javascript:document.title='pwned-src')
`

// TestViewerRendersInABrowser starts the viewer's local preview of a
// MarkdownView, loads it in headless Chromium and checks the rendered DOM:
// headings and navigation are there, and no injected script ran.
func TestViewerRendersInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: `make chromium` installs it from Debian's packages")
	}
	manifest := `apiVersion: view.trellis.dev/v1
kind: MarkdownView
metadata: {name: browser, namespace: default}
spec:
  markdowns:
    SUMMARY.md: |
      # Summary
      - [Welcome](welcome.md)
      - [Hostile](hostile.md)
    welcome.md: "# Welcome\n\nHello from **Trellis**."
    hostile.md: |
` + indent(xssMarkdown, "      ")
	if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	viewer := exec.CommandContext(ctx, filepath.Join(bin, "viewer"), "--kubeconfig", kubeconfig,
		"--markdownview", "default/browser", "--addr", addr)
	if err := viewer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = viewer.Wait() }()
	if err := waitHTTP("http://"+addr+"/healthz", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	dom := dumpDOM(t, chromium, "http://"+addr+"/")
	for _, want := range []string{`<h1 id="welcome">Welcome</h1>`, `<strong>Trellis</strong>`, `href="/hostile.md"`, `<title>Welcome</title>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}

	dom = dumpDOM(t, chromium, "http://"+addr+"/hostile.md")
	if strings.Contains(dom, "pwned") {
		t.Fatalf("an injected script ran:\n%s", dom)
	}
	if !strings.Contains(dom, "<title>Hostile</title>") {
		t.Errorf("title changed or page missing:\n%s", dom)
	}
	for _, bad := range []string{"<script", "<iframe", "<svg", "onerror=", "javascript:"} {
		if strings.Contains(strings.ToLower(dom), bad) {
			t.Errorf("rendered DOM contains %q:\n%s", bad, dom)
		}
	}

	// An edit of the MarkdownView reaches the preview without restarting anything.
	if _, err := kubectl("patch", "markdownview", "browser", "-n", "default", "--type=merge",
		"-p", `{"spec":{"markdowns":{"welcome.md":"# Edited\n"}}}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(dumpDOM(t, chromium, "http://"+addr+"/welcome.md"), `<h1 id="edited">Edited</h1>`) {
		if time.Now().After(deadline) {
			t.Fatal("edit did not reach the preview")
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// dumpDOM loads url in headless Chromium, lets scripts run, and returns the DOM.
func dumpDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	profile, err := os.MkdirTemp("", "trellis-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(profile) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--virtual-time-budget=2000", "--dump-dom", url).Output()
	if err != nil {
		t.Fatalf("chromium: %v %s", err, exitStderr(err))
	}
	return string(out)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestXSSCorpusRunsNoScriptInABrowser loads every entry of the viewer's XSS
// corpus (internal/viewer/testdata/xss-corpus.json, 88 attempts) as pages of
// one MarkdownView, renders each in headless Chromium, and checks the DOM the
// browser built: no script element, no event-handler attribute, no script URL.
func TestXSSCorpusRunsNoScriptInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: `make chromium` installs it from Debian's packages")
	}
	raw, err := os.ReadFile(filepath.Join(root, "internal", "viewer", "testdata", "xss-corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i, src := range corpus {
		files[fmt.Sprintf("x%02d.md", i)] = fmt.Sprintf("# Case %d\n\n%s\n", i, src)
	}
	mv := map[string]any{
		"apiVersion": "view.trellis.dev/v1", "kind": "MarkdownView",
		"metadata": map[string]any{"name": "xss", "namespace": "default"},
		"spec":     map[string]any{"markdowns": files},
	}
	manifest, _ := json.Marshal(mv)
	if _, err := kubectlIn(manifest, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	viewer := exec.CommandContext(ctx, filepath.Join(bin, "viewer"), "--kubeconfig", kubeconfig,
		"--markdownview", "default/xss", "--addr", addr)
	if err := viewer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = viewer.Wait() }()
	if err := waitHTTP("http://"+addr+"/healthz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range corpus {
		dom := dumpDOM(t, chromium, fmt.Sprintf("http://%s/x%02d.md", addr, i))
		if !strings.Contains(dom, fmt.Sprintf(">Case %d</h1>", i)) {
			t.Errorf("case %d did not render:\n%s", i, dom)
			continue
		}
		if problem := scriptCapable(dom); problem != "" {
			t.Errorf("case %d (%q): the browser's DOM has %s", i, corpus[i], problem)
		}
	}
}

// scriptCapable parses the DOM the browser built and reports the first
// element or attribute that could run script. The one form allowed is the
// page template's search box: a GET to /search.
func scriptCapable(dom string) string {
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		return "unparsable DOM: " + err.Error()
	}
	forms := 0
	var walk func(*html.Node) string
	walk = func(n *html.Node) string {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "iframe", "object", "embed", "frame", "applet", "base":
				return "a <" + n.Data + "> element"
			case "form":
				forms++
				if forms > 1 || attr(n, "action") != "/search" || attr(n, "method") != "get" {
					return "a <form> that is not the search box"
				}
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				val := strings.ToLower(strings.TrimSpace(a.Val))
				if strings.HasPrefix(key, "on") {
					return "an event-handler attribute " + a.Key
				}
				switch key {
				case "href", "src", "action", "formaction", "xlink:href":
					for _, scheme := range []string{"javascript:", "vbscript:", "data:text"} {
						if strings.HasPrefix(val, scheme) {
							return key + "=" + a.Val
						}
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if p := walk(c); p != "" {
				return p
			}
		}
		return ""
	}
	return walk(doc)
}

// attr returns the value of n's attribute key, or "".
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
