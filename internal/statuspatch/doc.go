// Package statuspatch writes the status of Deckhand's objects; every
// controller writes status through it, the same way.
//
// One writer per field: each controller writes its part of an object's
// status by server-side apply of the status subresource under a field
// manager of its own. A part is either the whole status except the
// conditions other controllers own (Writer.Status), or the conditions of a
// few types (Writer.Conditions). Conditions are a map list keyed by type
// (+listType=map, +listMapKey=type on every kind), so the API server keeps
// each writer's conditions apart: an apply sets and removes only the
// conditions its writer owns, and a condition another controller set
// survives it untouched, whatever copy of the object the apply was
// computed from (TestWritersKeepTheirOwnConditions, on a real API server).
//
// Nothing is sent when the writer's part, as read, is already as desired;
// the comparison is of the serialized forms, so a time that differs only
// below the second stored is no change (TestWritersKeepTheirOwnConditions
// counts the writes).
//
// One conflict policy: a write carries the resourceVersion it was computed
// from, because what a controller writes depends on what it read (history,
// lastTransitionTime, progress times, counts): a write from a stale copy is
// refused by the API server instead of overwriting newer state. A conflict is
// not an error: the write is dropped and the reconcile asks to run again
// after RetryAfterConflict, from a fresher copy (TestStaleCopyIsRetried). A
// writer sets
// observedGeneration in its part itself, and only when its reconcile
// succeeded; a Writer writes what it is given.
//
// Note: fields an older writer set by update-style patches stay owned by that
// update's field manager, and an apply that leaves them out would not remove
// them; after an apply, whatever of the writer's part the API server still
// holds beyond what was applied is removed by a JSON patch conditional on
// the version just written (TestUpdateWritesAreTakenOver); an object
// changed in between is a conflict (TestChangeBetweenApplyAndCleanupIsRetried).
// This relies on no status field having a schema default, which the API
// server would put back after each removal.
package statuspatch
