// Command mkimage packs files into a one-layer linux/amd64 image and writes it as an image archive (the docker-archive
// format, which `ctr images import` reads), so that the local stack's nodes, which reach no registry, run images built
// here from source. The image is a pure function of its arguments and the files' bytes and modes: timestamps are the
// epoch and entries are written in argument order, so a rebuild of unchanged sources gives the same digest.
//
//	mkimage -o OUT.tar -ref localhost/gpu-tenancy/pause:v1 [-entrypoint "/pause"] [-user 65532] /pause=bin/pause [/bin/sh=@/bin/busybox]
//
// A file argument is DEST=SRC (a regular file, its permission bits kept) or DEST=@TARGET (a symlink to TARGET). It
// prints the image's reference and digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	out := flag.String("o", "", "the image archive to write")
	ref := flag.String("ref", "", "the image's reference, such as localhost/gpu-tenancy/pause:v1")
	entrypoint := flag.String("entrypoint", "", "the entrypoint, words separated by spaces")
	user := flag.String("user", "", "the user the image runs as (numeric, so the kubelet can check runAsNonRoot)")
	flag.Parse()
	if *out == "" || *ref == "" || flag.NArg() == 0 {
		fail(fmt.Errorf("usage: mkimage -o OUT -ref REF [-entrypoint CMD] [-user UID] DEST=SRC|DEST=@TARGET ..."))
	}
	digest, err := build(*out, *ref, *entrypoint, *user, flag.Args())
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s %s\n", *ref, digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimage:", err)
	os.Exit(1)
}

func build(out, ref, entrypoint, user string, files []string) (v1.Hash, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := layerOf(files)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Entrypoint = strings.Fields(entrypoint)
	cf.Config.User = user
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// layerOf writes the files, each directory above them first, and /tmp, into one uncompressed tar layer.
func layerOf(files []string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	mkdirs := func(p string, mode int64) error {
		var parents []string
		for d := p; d != "/" && d != "."; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, arg := range files {
		dest, src, ok := strings.Cut(arg, "=")
		if !ok || !path.IsAbs(dest) {
			return nil, fmt.Errorf("file argument %q: want /DEST=SRC or /DEST=@TARGET", arg)
		}
		if err := mkdirs(path.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		nm := strings.TrimPrefix(dest, "/")
		if target, link := strings.CutPrefix(src, "@"); link {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: nm, Linkname: target, Mode: 0o777, ModTime: epoch}); err != nil {
				return nil, err
			}
			continue
		}
		if err := addFile(tw, nm, src, epoch); err != nil {
			return nil, err
		}
	}
	if err := mkdirs("/tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

func addFile(tw *tar.Writer, name, src string, modTime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: int64(st.Mode().Perm()), ModTime: modTime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
