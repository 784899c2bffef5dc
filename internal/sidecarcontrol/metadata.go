package sidecarcontrol

import (
	"fmt"
	"path"
	"sort"
	"strings"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// ReservedAnnotationDomain is the annotation key prefix (the DNS part
// before the "/") Deckhand writes on pods itself, with every subdomain of
// it (podset.apps.deckhand.dev, version.sidecarset.apps.deckhand.dev, ...):
// spec.patchPodMetadata may never set such a key, whatever the allowlist
// says, or a SidecarSet could forge another SidecarSet's record or a
// PodSet's bookkeeping.
var ReservedAnnotationDomain = deckhandv1alpha1.GroupVersion.Group

// IsReservedAnnotation reports whether key is in Deckhand's annotation
// domain or one of its subdomains.
func IsReservedAnnotation(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	prefix = strings.ToLower(prefix)
	return prefix == ReservedAnnotationDomain || strings.HasSuffix(prefix, "."+ReservedAnnotationDomain)
}

// MetadataAllowlist is the manager's --sidecarset-pod-metadata-allowlist
// (the annotation keys spec.patchPodMetadata may set) or its
// --sidecarset-pod-label-allowlist (the label keys). A SidecarSet is
// cluster-scoped and patches pods in every namespace it selects, so which
// pod metadata it may write is the platform's decision, not the SidecarSet
// author's. The zero value allows nothing.
type MetadataAllowlist struct {
	patterns []string
}

// ParseMetadataAllowlist reads allowlist entries: exact keys, or
// glob patterns (path.Match syntax, e.g. "example.com/*" for every key of a
// prefix). Blank entries are ignored.
func ParseMetadataAllowlist(entries []string) (MetadataAllowlist, error) {
	var a MetadataAllowlist
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return MetadataAllowlist{}, fmt.Errorf("SidecarSet pod metadata allowlist entry %q is not a valid pattern: %w", e, err)
		}
		a.patterns = append(a.patterns, e)
	}
	return a, nil
}

// Allows reports whether spec.patchPodMetadata may set the key.
func (a MetadataAllowlist) Allows(key string) bool {
	if IsReservedAnnotation(key) {
		return false
	}
	for _, p := range a.patterns {
		if ok, _ := path.Match(p, key); ok {
			return true
		}
	}
	return false
}

// String lists the entries as the flag takes them.
func (a MetadataAllowlist) String() string { return strings.Join(a.patterns, ",") }

// MetadataPatch is one spec.patchPodMetadata entry as injection applies it:
// its allowed keys in sorted order (a fixed order keeps the patch
// deterministic) with their values.
type MetadataPatch struct {
	Policy deckhandv1alpha1.SidecarSetPatchPolicyType
	Keys   []string
	Values []string
}

// ApplyPodMetadata applies patches, in order, to the pod annotations get
// reports, calling set with every value a policy sets: Retain sets a key
// the pod lacks, Overwrite sets the value whatever the pod had,
// MergePatchJson merges the value into the pod's JSON object (or sets it
// where the pod lacks the key or has it empty). set may be called with the
// value the pod already has; get must see what set did, so that a later
// entry builds on an earlier one. It returns the keys MergePatchJson could
// not merge into because the pod's value is not a JSON object: they keep
// the pod's value. Pod injection and in-place updates both apply
// spec.patchPodMetadata through it.
func ApplyPodMetadata(patches []MetadataPatch, get func(key string) (string, bool), set func(key, value string)) (notMerged []string) {
	for _, mp := range patches {
		for i, k := range mp.Keys {
			v := mp.Values[i]
			cur, has := get(k)
			switch mp.Policy {
			case deckhandv1alpha1.SidecarSetOverwritePatchPolicy:
				set(k, v)
			case deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy:
				if !has || cur == "" {
					set(k, v)
					continue
				}
				merged, ok := MergeJSONObject(cur, v)
				if !ok {
					notMerged = append(notMerged, k)
					continue
				}
				set(k, merged)
			default: // Retain
				if !has {
					set(k, v)
				}
			}
		}
	}
	return notMerged
}

// PodMetadataAllowlists are the manager's allowlists for
// spec.patchPodMetadata: --sidecarset-pod-metadata-allowlist for
// annotations and --sidecarset-pod-label-allowlist for labels.
type PodMetadataAllowlists struct {
	Annotations, Labels MetadataAllowlist
}

// compileMetadata returns the entries of spec.patchPodMetadata, their
// labels (or, when labels is false, their annotations), restricted to the
// keys allow allows, nil when none remains. Validation refuses the others;
// filtering here as well keeps a key out of pods when the allowlist is
// narrowed after the SidecarSet was admitted. MergePatchJson entries have
// no labels (validation refuses them: a label value cannot hold JSON).
func compileMetadata(s *deckhandv1alpha1.SidecarSet, allow MetadataAllowlist, labels bool) []MetadataPatch {
	var out []MetadataPatch
	for _, e := range s.Spec.PatchPodMetadata {
		mp := MetadataPatch{Policy: e.PatchPolicy}
		if mp.Policy == "" {
			mp.Policy = deckhandv1alpha1.SidecarSetRetainPatchPolicy
		}
		values := e.Annotations
		if labels {
			if mp.Policy == deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy {
				continue
			}
			values = e.Labels
		}
		for k := range values {
			if allow.Allows(k) {
				mp.Keys = append(mp.Keys, k)
			}
		}
		if len(mp.Keys) == 0 {
			continue
		}
		sort.Strings(mp.Keys)
		for _, k := range mp.Keys {
			mp.Values = append(mp.Values, values[k])
		}
		out = append(out, mp)
	}
	return out
}

// PodMetadataAllowlist returns the annotation keys spec.patchPodMetadata
// may set (Options.PodMetadata).
func (l *Lister) PodMetadataAllowlist() MetadataAllowlist {
	return l.podMetadataAllowlists().Annotations
}

// PodLabelAllowlist returns the label keys spec.patchPodMetadata may set
// (Options.PodMetadata).
func (l *Lister) PodLabelAllowlist() MetadataAllowlist { return l.podMetadataAllowlists().Labels }

func (l *Lister) podMetadataAllowlists() PodMetadataAllowlists {
	if l.derived == nil {
		return PodMetadataAllowlists{}
	}
	return l.derived.allow
}
