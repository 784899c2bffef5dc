package podutil

import (
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
)

// ImageMatches reports whether a container's status shows it running
// specImage, the image of the container's spec. It decides when an in-place
// image update is done, so it must accept every way a runtime reports the
// image it runs:
//
//   - status.image is the spec image as the runtime normalised it: "nginx",
//     "nginx:latest", "library/nginx" and "docker.io/library/nginx:latest" are
//     the same image (default registry, default "library/" path and default
//     tag, as reference.ParseNormalizedNamed reads them);
//   - a spec image pinned by digest ("nginx@sha256:…", with or without a tag)
//     matches a status whose imageID carries that digest, in any of the forms
//     runtimes use: "docker.io/library/nginx@sha256:…" (containerd, CRI-O),
//     a bare "sha256:…", or Docker's "docker-pullable://nginx@sha256:…". The
//     digest alone decides: it names the content, whichever repository the
//     runtime pulled it through.
//
// A spec image that does not parse as a reference matches only the same
// string in status.image or status.imageID. An empty spec image matches
// nothing.
func ImageMatches(specImage string, status corev1.ContainerStatus) bool {
	if specImage == "" {
		return false
	}
	if specImage == status.Image {
		return true
	}
	spec, err := reference.ParseNormalizedNamed(specImage)
	if err != nil {
		return specImage == status.ImageID
	}
	if d, ok := spec.(reference.Digested); ok {
		want := d.Digest().String()
		if imageIDDigest(status.ImageID) == want {
			return true
		}
		if st, err := reference.ParseNormalizedNamed(status.Image); err == nil {
			if sd, ok := st.(reference.Digested); ok && sd.Digest().String() == want {
				return true
			}
		}
		return false
	}
	st, err := reference.ParseNormalizedNamed(status.Image)
	if err != nil {
		return false
	}
	if _, ok := st.(reference.Tagged); !ok && !reference.IsNameOnly(st) {
		// The status names a digest only: nothing to compare a tag with.
		return false
	}
	return taggedName(spec) == taggedName(st)
}

// taggedName is "domain/path:tag" of a reference with the tag defaulted to
// "latest" and any digest left out.
func taggedName(ref reference.Named) string {
	tag := "latest"
	if t, ok := ref.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return ref.Name() + ":" + tag
}

// imageIDDigest returns the digest an imageID carries ("" when none):
// the part after the last "@" of "[scheme://]name@algorithm:hex", or the
// whole bare "algorithm:hex".
func imageIDDigest(imageID string) string {
	if i := strings.Index(imageID, "://"); i >= 0 {
		imageID = imageID[i+3:]
	}
	if i := strings.LastIndexByte(imageID, '@'); i >= 0 {
		return imageID[i+1:]
	}
	if strings.Contains(imageID, ":") {
		return imageID
	}
	return ""
}
