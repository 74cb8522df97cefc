package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// checkUsage is the check mode's synopsis.
const checkUsage = "usage: viewer check [--contains TEXT] [--timeout 2m] URL"

// runCheck is `viewer check`: the chart's `helm test` hook runs it in the
// viewer image (which has no shell and no curl) to prove a view is served.
// It gets URL until the answer is 200 OK with TEXT in its body, retrying
// while the viewer starts, and fails when --timeout runs out. It returns
// the exit status.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	contains := fs.String("contains", "", "Text the page's body must contain.")
	timeout := fs.Duration("timeout", 2*time.Minute, "How long to keep trying.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		_, _ = fmt.Fprintln(stderr, checkUsage)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, http.DefaultClient, fs.Arg(0), *contains, time.Second); err != nil {
		_, _ = fmt.Fprintln(stderr, "check:", err)
		return 1
	}
	_, _ = fmt.Fprintf(stdout, "%s serves %q\n", fs.Arg(0), *contains)
	return 0
}

// errUnexpanded: the URL still holds a $(VAR) the kubelet did not expand,
// as it leaves a variable the container's environment lacks (a Service's
// variables are there only if it existed when the container started).
var errUnexpanded = errors.New("the URL names a variable the environment does not have")

// check gets url every interval until it answers 200 OK with contains in
// its body, or ctx ends; the error says what the last try got.
func check(ctx context.Context, client *http.Client, url, contains string, interval time.Duration) error {
	if strings.Contains(url, "$(") {
		return fmt.Errorf("%s: %w", url, errUnexpanded)
	}
	var last error
	for {
		last = get(ctx, client, url, contains)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up (%w): %w", url, ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

func get(ctx context.Context, client *http.Client, url, contains string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	if !strings.Contains(string(body), contains) {
		return fmt.Errorf("200 OK, but the page lacks %q", contains)
	}
	return nil
}
