// Package walkthrough runs the "Walkthrough on `make run`" sections of the
// docs of the four kinds exactly as written: it starts the devcluster
// program the way `make run` does, extracts every ```sh walkthrough block
// from docs/<kind>.md and runs the blocks in order with bash, then checks
// through the API the end state the doc claims. A doc that drifts from what
// Deckhand does fails here, with the block and its output. On the same
// cluster it applies the example objects of the operator tutorials the four
// kinds come from (testdata/tutorials, docs/tutorials.md) with kubectl and
// checks what those tutorials say happens to them.
package walkthrough
