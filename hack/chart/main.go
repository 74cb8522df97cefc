// Command chart writes the Helm chart charts/trellis from config/, so that
// the chart and `make deploy` can never disagree, and packages it for a
// release (docs/operations.md, "Install with Helm"):
//
//	chart generate -kustomize bin/kustomize -config config -out charts/trellis
//	chart package -kustomize bin/kustomize -config config -chart charts/trellis -version vX.Y.Z -images dist/images.txt -out dist
//
// generate renders config/default (and config/prometheus, config/grafana
// when they exist) and turns the objects into templates: the values users
// change become .Values, with config's values as their defaults. package
// checks the committed chart is what generate writes, then writes
// dist/trellis-X.Y.Z.tgz with the release's version and its images pinned
// by digest in values.yaml, byte for byte the same on every build.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: chart generate|package FLAGS")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	kustomize := fs.String("kustomize", "kustomize", "the kustomize binary")
	config := fs.String("config", "config", "the kustomize tree (default/, prometheus/, grafana/)")
	out := fs.String("out", "", "generate: the chart directory; package: the directory the .tgz goes in")
	chartDir := fs.String("chart", "charts/trellis", "package: the committed chart")
	version := fs.String("version", "", "package: the release, vX.Y.Z")
	images := fs.String("images", "", "package: the release's images.txt")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: chart %s -out DIR (and more flags: see -h)", args[0])
	}
	switch args[0] {
	case "generate":
		files, err := generate(*kustomize, *config, defaultRelease)
		if err != nil {
			return err
		}
		return writeChart(*out, files)
	case "package":
		if *version == "" || *images == "" {
			return fmt.Errorf("usage: chart package -version vX.Y.Z -images FILE -out DIR")
		}
		rel, err := releaseOf(*version, *images)
		if err != nil {
			return err
		}
		path, err := packageChart(*kustomize, *config, *chartDir, rel, *out)
		if err != nil {
			return err
		}
		fmt.Println(path)
		return nil
	default:
		return fmt.Errorf("unknown command %q: want generate or package", args[0])
	}
}
