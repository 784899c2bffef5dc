package podutil

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImageMatches(t *testing.T) {
	const (
		dig   = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		other = "sha256:" + "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	)
	cases := map[string]struct {
		spec, image, imageID string
		want                 bool
	}{
		// Tags, the default registry, the "library/" path and the default tag.
		"identical":                            {"nginx:1.27", "nginx:1.27", "", true},
		"fully qualified status":               {"nginx:1.27", "docker.io/library/nginx:1.27", "", true},
		"fully qualified spec":                 {"docker.io/library/nginx:1.27", "nginx:1.27", "", true},
		"untagged is latest":                   {"nginx", "nginx:latest", "", true},
		"untagged is docker.io latest":         {"nginx", "docker.io/library/nginx:latest", "", true},
		"library path":                         {"library/nginx", "docker.io/library/nginx:latest", "", true},
		"legacy index.docker.io":               {"index.docker.io/library/nginx:1.25", "nginx:1.25", "", true},
		"docker hub user repository":           {"team/app:1", "docker.io/team/app:1", "", true},
		"other registry":                       {"registry.example.com/app:1", "registry.example.com/app:1", "", true},
		"registry with port":                   {"registry:5000/team/app", "registry:5000/team/app:latest", "", true},
		"registry with port and tag":           {"registry:5000/team/app:v1", "registry:5000/team/app:v1", "", true},
		"localhost registry with port":         {"localhost:5000/app:1", "localhost:5000/app:1", "", true},
		"localhost registry":                   {"localhost/app", "localhost/app:latest", "", true},
		"ghcr":                                 {"ghcr.io/deckhand-dev/deckhand:1", "ghcr.io/deckhand-dev/deckhand:1", "", true},
		"other tag":                            {"nginx:1.27", "nginx:1.26", "", false},
		"other tag fully qualified":            {"nginx:1.27", "docker.io/library/nginx:1.26", "", false},
		"untagged is not another tag":          {"nginx", "nginx:1.27", "", false},
		"other registry is another image":      {"registry.example.com/app:1", "docker.io/library/app:1", "", false},
		"user repository is not library":       {"team/nginx:1", "nginx:1", "", false},
		"tag against a digest-only status":     {"nginx:1.27", "docker.io/library/nginx@" + dig, "docker.io/library/nginx@" + dig, false},
		"tag ignores the imageID":              {"nginx:1.27", "nginx:1.26", "docker.io/library/nginx@" + dig, false},
		"tag against tag and digest in status": {"nginx:1.27", "docker.io/library/nginx:1.27@" + dig, "", true},
		"not started yet":                      {"nginx:1.27", "", "", false},

		// Digests: the status imageID in every form runtimes report.
		"digest, containerd and CRI-O imageID": {"nginx@" + dig, "docker.io/library/nginx:1.27", "docker.io/library/nginx@" + dig, true},
		"digest, bare imageID":                 {"nginx@" + dig, "docker.io/library/nginx:1.27", dig, true},
		"digest, docker-pullable imageID":      {"nginx@" + dig, "nginx:1.27", "docker-pullable://nginx@" + dig, true},
		"digest, docker imageID":               {"nginx@" + dig, "nginx:1.27", "docker://" + dig, true},
		"digest, fully qualified spec":         {"docker.io/library/nginx@" + dig, "nginx:1.27", "docker-pullable://nginx@" + dig, true},
		"digest with tag in spec":              {"nginx:1.27@" + dig, "docker.io/library/nginx:1.27", "docker.io/library/nginx@" + dig, true},
		"digest in status image":               {"nginx@" + dig, "docker.io/library/nginx@" + dig, "", true},
		"digest through a mirror":              {"nginx@" + dig, "mirror.example.com/nginx:1.27", "mirror.example.com/library/nginx@" + dig, true},
		"other digest":                         {"nginx@" + dig, "docker.io/library/nginx:1.27", "docker.io/library/nginx@" + other, false},
		"other digest, bare":                   {"nginx@" + dig, "docker.io/library/nginx:1.27", other, false},
		"digest without imageID":               {"nginx@" + dig, "docker.io/library/nginx:1.27", "", false},
		"digest against a tag-only imageID":    {"nginx@" + dig, "nginx:1.27", "docker.io/library/nginx:1.27", false},

		// References that do not parse compare as exact strings.
		"unparseable, same string":           {"Nginx:1", "Nginx:1", "", true},
		"unparseable, normalised status":     {"Nginx:1", "docker.io/library/nginx:1", "", false},
		"unparseable, same imageID":          {"not a reference", "", "not a reference", true},
		"short digest is unparseable":        {"nginx@sha256:abc", "nginx@sha256:abc", "", true},
		"short digest, imageID suffix":       {"nginx@sha256:abc", "nginx:1", "docker.io/library/nginx@sha256:abc", false},
		"unparseable status":                 {"nginx:1.27", "???", "", false},
		"empty spec matches nothing":         {"", "", "", false},
		"spec of spaces":                     {"   ", "   x", "", false},
		"very long reference does not panic": {"a/" + strings.Repeat("b", 300) + ":1", "a/" + strings.Repeat("b", 300) + ":2", "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status := corev1.ContainerStatus{Name: "c", Image: tc.image, ImageID: tc.imageID}
			if got := ImageMatches(tc.spec, status); got != tc.want {
				t.Errorf("ImageMatches(%q, {image: %q, imageID: %q}) = %v, want %v", tc.spec, tc.image, tc.imageID, got, tc.want)
			}
		})
	}
}

func FuzzImageMatches(f *testing.F) {
	f.Add("nginx@sha256:0123", "docker.io/library/nginx:1", "docker-pullable://nginx@sha256:0123")
	f.Add("nginx", "nginx:latest", "")
	f.Add("", "@", "://")
	f.Fuzz(func(t *testing.T, spec, image, imageID string) {
		_ = ImageMatches(spec, corev1.ContainerStatus{Image: image, ImageID: imageID})
	})
}
