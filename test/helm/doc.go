// Package helm tests the Helm chart charts/deckhand: it renders the same
// objects as dist/install.yaml with the default values, each value has the
// effect docs/helm.md describes, helm lint and helm package accept it, and
// an installation into a namespace other than deckhand-system serves (see
// render_test.go and install_test.go). It needs bin/helm (`make helm`).
package helm
