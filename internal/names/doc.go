// Package names shortens the names and label values Deckhand derives from
// users' names, with a hash of what was cut, so that they fit and stay
// distinct.
package names
