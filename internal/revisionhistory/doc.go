// Package revisionhistory holds what the controllers that keep a history of
// ControllerRevisions share (PodSet per pod template, SidecarSet per
// injected spec): revision names, collision handling, revision numbering
// and the choice and deletion of revisions to prune.
package revisionhistory
