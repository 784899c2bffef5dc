// Package fuzz holds Deckhand's native Go fuzz tests: defaulting and
// validation of the four kinds, SidecarSet pod injection, cron and time-zone
// parsing, raw AdmissionReview bodies sent to the webhook handlers over HTTP,
// and API round trips through the CRDs' structural schemas. The seed corpora
// run with every `go test`; `make fuzz` runs each target for FUZZTIME.
//
// The package starts no control plane, so that every fuzz worker is cheap.
package fuzz
