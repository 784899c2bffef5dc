// Package hostile tests what a tenant with ordinary rights, or anything that
// can reach the webhook port, can do to Deckhand: oversized and expensive
// input, forged admission requests and annotations, and sizes a tenant
// controls. Each test runs on a real local control plane (etcd and
// kube-apiserver) with the deckhand binary running as a separate process
// under its own ServiceAccount and roles, as in a real installation; what it
// asserts is what a platform team is told in docs/security.md.
package hostile
