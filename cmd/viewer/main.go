// Command viewer serves Markdown files as a rendered website. In a cluster it
// serves the MarkdownView's ConfigMap, mounted at --dir; on a laptop it can
// serve a MarkdownView straight from the API server (--markdownview ns/name),
// following its edits live. `viewer check` gets a page until it holds a
// text (check.go): the chart's `helm test` hook.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/memlimit"
	"github.com/trellis-dev/trellis/internal/version"
	"github.com/trellis-dev/trellis/internal/viewer"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(runCheck(os.Args[2:], os.Stdout, os.Stderr))
	}
	var (
		addr         = flag.String("addr", ":8080", "Address to serve on.")
		dir          = flag.String("dir", "/markdown", "Directory of Markdown files and images (a mounted ConfigMap).")
		markdownView = flag.String("markdownview", "", "Serve this MarkdownView (namespace/name) from the cluster instead of --dir.")
		kubeconfig   = flag.String("kubeconfig", "", "Kubeconfig for --markdownview (default: in-cluster or $KUBECONFIG).")
		artifact     = flag.String("artifact", "", "Serve the Flux source artifact this file names (JSON: url, digest, revision, path) instead of --dir.")
		interval     = flag.Duration("artifact-interval", 2*time.Second, "How often --artifact's file is read, and a failed fetch retried.")
		maxDownload  = flag.Int64("max-artifact-bytes", viewer.DefaultLimits.Download, "The most bytes of an artifact (the gzipped tarball) fetched.")
		maxUnpacked  = flag.Int64("max-unpacked-bytes", viewer.DefaultLimits.Unpacked, "The most bytes read out of an artifact, served or not.")
		maxEntries   = flag.Int("max-artifact-entries", viewer.DefaultLimits.Entries, "The most entries (files, folders, links) of an artifact.")
		maxSite      = flag.Int64("max-site-bytes", viewer.DefaultLimits.Site, "The most bytes of pages and images kept from an artifact, their names counted with them.")
		showVersion  = flag.Bool("version", false, "Print the version and exit.")
	)
	flag.Parse()
	if *showVersion {
		fmt.Println("trellis-viewer", version.Get())
		return
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// A site's pages, index and the next version being built share the
	// pod's limit (128 Mi by default): collect harder near it.
	if limit := memlimit.Apply(); limit > 0 {
		log.Info("Go soft memory limit set to 90% of the container's", "bytes", limit)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var source viewer.Source = viewer.DirSource{Dir: *dir}
	if *artifact != "" {
		// No credentials: the artifact server is reached as anyone in the
		// cluster may, and what it serves is checked against the digest.
		src := &viewer.ArtifactSource{
			File: *artifact, Client: &http.Client{Timeout: 2 * time.Minute}, Interval: *interval, Log: log,
			Limits: viewer.Limits{Download: *maxDownload, Unpacked: *maxUnpacked, Entries: *maxEntries, Site: *maxSite},
		}
		go src.Run(ctx)
		source = src
	}
	if *markdownView != "" {
		ns, name, ok := strings.Cut(*markdownView, "/")
		if !ok || ns == "" || name == "" {
			fmt.Fprintln(os.Stderr, "--markdownview wants namespace/name")
			os.Exit(2)
		}
		mem := &viewer.MemorySource{}
		if err := followMarkdownView(ctx, *kubeconfig, ns, name, mem, log); err != nil {
			log.Error("following MarkdownView", "err", err)
			os.Exit(1)
		}
		source = mem
	}

	srv := &http.Server{
		Addr:              *addr,
		Handler:           viewer.NewServer(source, log),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("serving", "addr", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serving", "err", err)
		os.Exit(1)
	}
}
