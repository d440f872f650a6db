// Command registry serves a private image registry on the local stack's nodes' network: go-containerregistry's
// in-memory registry (pkg/registry) behind HTTP basic authentication, holding the images it is given. tests/nodes
// runs it to show what the kubelet does with another tenant's private image: the nodes' containerd reaches it over
// plain HTTP (scripts/local-nodes.sh, hosts.toml), and only a pod with the credentials may start what it holds.
//
//	registry -listen 10.243.0.1:5000 -user U -password-file F private/busybox:1=busybox.tar ...
//
// Each image is an image archive (mkimage's output), given a label that no other image has, so that its digest is
// its own: the kubelet keys what it pulled, and with which credentials, by image ID, and a copy with the digest of an
// image the nodes hold already would bind that image's other names to this registry's credentials. It prints one
// line per image, "REF DIGEST", then "serving", and serves until it is stopped.
package main

import (
	"bytes"
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// privateLabel marks an image as this registry's copy.
const privateLabel = "gpu-tenancy.io/private-registry-copy"

func main() {
	listen := flag.String("listen", "", "the address to serve on, such as 10.243.0.1:5000")
	user := flag.String("user", "", "the one user allowed")
	passwordFile := flag.String("password-file", "", "a file holding that user's password")
	flag.Parse()
	if *listen == "" || *user == "" || *passwordFile == "" || flag.NArg() == 0 {
		fail(fmt.Errorf("usage: registry -listen ADDR -user U -password-file F REPO:TAG=IMAGE.tar ..."))
	}
	password, err := os.ReadFile(*passwordFile)
	if err != nil {
		fail(err)
	}
	store := registry.New(registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags)))
	for _, arg := range flag.Args() {
		repoTag, archive, ok := strings.Cut(arg, "=")
		repo, tag, hasTag := strings.Cut(repoTag, ":")
		if !ok || !hasTag {
			fail(fmt.Errorf("%s: want REPO:TAG=IMAGE.tar", arg))
		}
		digest, err := push(store, repo, tag, archive)
		if err != nil {
			fail(fmt.Errorf("%s: %w", arg, err))
		}
		fmt.Printf("%s/%s:%s %s\n", *listen, repo, tag, digest)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err)
	}
	fmt.Println("serving")
	fail(http.Serve(l, basicAuth(*user, strings.TrimSpace(string(password)), store)))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "registry:", err)
	os.Exit(1)
}

// basicAuth asks every request for the one user's credentials, as a private registry does: the challenge is what
// containerd answers with the credentials the kubelet hands it from the pod's pull secret.
func basicAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="gpu-tenancy"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// push stores the image of an archive, labelled, under repo:tag, through the registry's own API (a monolithic blob
// upload per blob, then the manifest), and returns its digest.
func push(store http.Handler, repo, tag, archive string) (v1.Hash, error) {
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		return v1.Hash{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cfg = cfg.DeepCopy()
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	cfg.Config.Labels[privateLabel] = repo + ":" + tag
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return v1.Hash{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	for _, layer := range layers {
		digest, err := layer.Digest()
		if err != nil {
			return v1.Hash{}, err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return v1.Hash{}, err
		}
		blob, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return v1.Hash{}, err
		}
		if err := upload(store, repo, digest, blob); err != nil {
			return v1.Hash{}, err
		}
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := upload(store, repo, configDigest, rawConfig); err != nil {
		return v1.Hash{}, err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return v1.Hash{}, err
	}
	req := httptest.NewRequest(http.MethodPut, "/v2/"+repo+"/manifests/"+tag, bytes.NewReader(manifest))
	req.Header.Set("Content-Type", string(mediaType))
	if err := serve(store, req, http.StatusCreated); err != nil {
		return v1.Hash{}, fmt.Errorf("manifest: %w", err)
	}
	return img.Digest()
}

func upload(store http.Handler, repo string, digest v1.Hash, blob []byte) error {
	req := httptest.NewRequest(http.MethodPost, "/v2/"+repo+"/blobs/uploads/?digest="+digest.String(), bytes.NewReader(blob))
	if err := serve(store, req, http.StatusCreated); err != nil {
		return fmt.Errorf("blob %s: %w", digest, err)
	}
	return nil
}

func serve(store http.Handler, req *http.Request, want int) error {
	rec := httptest.NewRecorder()
	store.ServeHTTP(rec, req)
	if rec.Code != want {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return nil
}
