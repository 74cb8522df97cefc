// Command images builds Trellis' container images without a container
// engine, with go-containerregistry: one layer holding a static binary and the
// base files (user database, CA certificates), the non-root user 65532, OCI
// labels, every time stamp at the Unix epoch, so the same source gives the
// same digest. Given binaries for several platforms it writes one OCI image
// index of an image each. `make images` and `make release` run it;
// docs/images.md explains it.
//
//	images image -binary linux/amd64=bin/linux-amd64/manager -entrypoint /manager \
//	  -ref trellis-manager:dev -label org.opencontainers.image.title=... -out bin/images/trellis-manager.tar
//	images rootfs DIR   # the base files, for the Dockerfile's scratch stage
//	images push -archive dist/trellis-manager.tar -ref ghcr.io/trellis-dev/trellis-manager:v0.1.0
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: images image|rootfs|push ARGS")
	}
	switch args[0] {
	case "rootfs":
		if len(args) != 2 {
			return fmt.Errorf("usage: images rootfs DIR")
		}
		return writeRootFS(args[1])
	case "image":
		return image(args[1:])
	case "push":
		return pushCommand(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want image, rootfs or push", args[0])
	}
}

// labelFlags collects repeated -label key=value flags.
type labelFlags map[string]string

func (l labelFlags) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k+"="+l[k])
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (l labelFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q is not key=value", s)
	}
	l[k] = v
	return nil
}

// binaryFlags collects repeated -binary os/arch=path flags, in order.
type binaryFlags []platformBinary

type platformBinary struct {
	platform v1.Platform
	path     string
}

func (b *binaryFlags) String() string {
	s := make([]string, 0, len(*b))
	for _, pb := range *b {
		s = append(s, pb.platform.String()+"="+pb.path)
	}
	return strings.Join(s, ",")
}

func (b *binaryFlags) Set(s string) error {
	p, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("binary %q is not os/arch=path (e.g. linux/arm64=bin/linux-arm64/manager)", s)
	}
	platform, err := v1.ParsePlatform(p)
	if err != nil {
		return err
	}
	if platform.OS != "linux" || platform.Architecture == "" {
		return fmt.Errorf("binary %q: want a linux/ARCH platform", s)
	}
	*b = append(*b, platformBinary{platform: *platform, path: path})
	return nil
}

func image(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var binaries binaryFlags
	fs.Var(&binaries, "binary", "os/arch=path: a static executable for that platform (repeatable: several make an image index)")
	entrypoint := fs.String("entrypoint", "", "its path in the image, e.g. /manager")
	ref := fs.String("ref", "", "image reference the archive names, e.g. trellis-manager:dev")
	out := fs.String("out", "", "where to write the OCI archive (a tar of an OCI image layout)")
	labels := labelFlags{}
	fs.Var(labels, "label", "OCI label key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(binaries) == 0 || *entrypoint == "" || *ref == "" || *out == "" {
		return fmt.Errorf("-binary, -entrypoint, -ref and -out are required")
	}
	if !strings.HasPrefix(*entrypoint, "/") {
		return fmt.Errorf("-entrypoint %q must be an absolute path", *entrypoint)
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("-ref: %w", err)
	}
	specs := make([]spec, 0, len(binaries))
	for _, b := range binaries {
		data, err := os.ReadFile(b.path)
		if err != nil {
			return err
		}
		specs = append(specs, spec{platform: b.platform, binary: data, entrypoint: *entrypoint, labels: labels})
	}
	a, err := buildAll(specs)
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	digest, err := writeOCIArchive(&archive, a, containerdName(tag))
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, archive.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s %s@%s\n", *out, containerdName(tag), digest)
	return nil
}

// containerdName is the fully qualified name containerd (and so the kubelet)
// gives a reference: "trellis-manager:dev" is docker.io/library/trellis-manager:dev.
func containerdName(t name.Tag) string {
	registry := t.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + t.RepositoryStr() + ":" + t.TagStr()
}
