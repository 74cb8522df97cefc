// Command release writes and checks the parts of a Trellis release that are
// not images (`make release`, docs/operations.md):
//
//	release install -kustomize bin/kustomize -config config/default -images dist/images.txt -out dist/install.yaml
//	release verify [-platforms "linux/amd64 linux/arm64"] [-binaries dist/.bin] dist
//
// install renders the kustomization with the manager's image and its
// --viewer-image flag pinned to the digests of the images just built, by
// kustomize itself (an overlay written to a temporary directory), and checks
// the result (make release renders config/default as install.yaml, and
// config/default-without-mutating-policies as
// install-without-mutating-policies.yaml); verify checks a whole dist/: the
// checksums (and that checksums.txt's signature, if any, is of them), the
// archives' digests and labels, that both install files name
// exactly those images, and that the second is the first but for its
// MutatingAdmissionPolicies; that each image is an index of the platforms,
// and each has an SBOM per platform listing the modules its binary links.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release install|verify ARGS")
	}
	switch args[0] {
	case "install":
		fs := flag.NewFlagSet("install", flag.ContinueOnError)
		kustomize := fs.String("kustomize", "kustomize", "the kustomize binary")
		config := fs.String("config", "config/default", "the kustomization to render")
		images := fs.String("images", "", "the release's images.txt (archive and reference@digest per line)")
		out := fs.String("out", "", "where to write install.yaml")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *images == "" || *out == "" || fs.NArg() != 0 {
			return fmt.Errorf("usage: release install -kustomize BIN -config DIR -images FILE -out FILE")
		}
		list, err := readImages(*images)
		if err != nil {
			return err
		}
		manifests, err := renderInstall(*kustomize, *config, list)
		if err != nil {
			return err
		}
		return os.WriteFile(*out, manifests, 0o644)
	case "verify":
		fs := flag.NewFlagSet("verify", flag.ContinueOnError)
		platforms := fs.String("platforms", "linux/amd64 linux/arm64", "the platforms every image is built for, in its index's order")
		binaries := fs.String("binaries", "", "where the release's binaries were built (OS-ARCH/NAME), to compare with the SBOMs")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: release verify [-platforms LIST] [-binaries DIR] DIR")
		}
		return verifyDist(fs.Arg(0), strings.Fields(*platforms), *binaries)
	default:
		return fmt.Errorf("unknown command %q: want install or verify", args[0])
	}
}
