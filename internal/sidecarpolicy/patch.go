package sidecarpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
)

// patch is the JSONPatch expression: the webhook's patch, computed in CEL.
func (c *compiler) patch() string {
	var ops []string
	op := func(cond, path, value string) {
		ops = append(ops, fmt.Sprintf("(%s ? [JSONPatch{op: 'add', path: %s, value: %s}] : [])", cond, path, value))
	}
	bi, ai := c.sidecars(c.s.Spec.InitContainers, "i")
	bc, ac := c.sidecars(c.s.Spec.Containers, "c")
	lists := []struct {
		path, low, high, size, newBefore string
		before, after                    []sidecarLit
	}{
		{"/spec/initContainers", "variables.initLow", "variables.initHigh", "variables.initContainers.size()", "variables.newBeforeInit", bi, ai},
		{"/spec/containers", "variables.containerLow", "variables.containerHigh", "variables.containers.size()", "variables.newBefore", bc, ac},
	}
	for _, l := range lists {
		if len(l.before)+len(l.after) == 0 {
			continue
		}
		field := strings.TrimPrefix(l.path, "/spec/")
		op(fmt.Sprintf("!has(object.spec.%s) && variables.newBefore%s + variables.newAfter%s > 0", field, suffix(field), suffix(field)), q(l.path), "[]")
		// Inserted last first at one index, items keep their spec order.
		for i := len(l.before) - 1; i >= 0; i-- {
			op(fmt.Sprintf("!(%s in variables.names)", q(l.before[i].name)), fmt.Sprintf("%s + '/' + string(%s)", q(l.path), l.low), l.before[i].value)
		}
		for i := len(l.after) - 1; i >= 0; i-- {
			op(fmt.Sprintf("!(%s in variables.names)", q(l.after[i].name)), fmt.Sprintf("%s + '/' + string(%s + %s - %s)", q(l.path), l.size, l.newBefore, l.high), l.after[i].value)
		}
	}
	for _, l := range []struct {
		path, field, present, high, newVar string
		items                              []sidecarLit
	}{
		{"/spec/volumes", "volumes", "volumeNames", "variables.volumeHigh", "variables.newVolumes", c.items(len(c.s.Spec.Volumes), func(i int) (string, any) { return c.s.Spec.Volumes[i].Name, &c.s.Spec.Volumes[i] })},
		{"/spec/imagePullSecrets", "imagePullSecrets", "secretNames", "variables.secretHigh", "variables.newSecrets", c.items(len(c.s.Spec.ImagePullSecrets), func(i int) (string, any) { return c.s.Spec.ImagePullSecrets[i].Name, &c.s.Spec.ImagePullSecrets[i] })},
	} {
		if len(l.items) == 0 {
			continue
		}
		op(fmt.Sprintf("!has(object.spec.%s) && %s > 0", l.field, l.newVar), q(l.path), "[]")
		// A name listed twice is added once (its first entry), as by the webhook.
		for i := len(l.items) - 1; i >= 0; i-- {
			it := l.items[i]
			if slices.ContainsFunc(l.items[:i], func(o sidecarLit) bool { return o.name == it.name }) {
				continue
			}
			op(fmt.Sprintf("!(%s in variables.%s)", q(it.name), l.present), fmt.Sprintf("%s + '/' + string(variables.%s.size() - %s)", q(l.path), l.present, l.high), it.value)
		}
	}
	ops = append(ops, gateOps()...)
	op("!has(object.metadata.annotations)", q("/metadata/annotations"), "dyn({})")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetInjectedAnnotation), "variables.newEntries.map(e, e.substring(1, e.indexOf('\":{'))).join(',')")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetHashAnnotation), "'{' + variables.newEntries.join(',') + '}'")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation), "'{' + variables.newEntriesWI.join(',') + '}'")
	full := "variables.skip ? (" + c.withoutOwnEntry() + ") :\n" + strings.Join(ops, " +\n")
	return fmt.Sprintf("%s ? [] :\n%s ?\n(%s) :\n(%s)", c.skippedCondition(), freshCondition, c.freshPatch(bi, ai, bc, ac), full)
}

// withoutOwnEntry is the patch for a pod with a record that this
// SidecarSet does not inject: the record rewritten without an entry of this
// SidecarSet's own, which came with the pod (the policy runs once per
// admission) and would make the pod's own containers pass for its
// sidecars. A record not in the webhook's form is dropped whole, and a
// record left with no entry is removed, as the webhook does.
func (c *compiler) withoutOwnEntry() string {
	own := q(`"` + c.s.Name + `":{`)
	kept := func(v string) string { return fmt.Sprintf("variables.%s.filter(e, !e.startsWith(%s))", v, own) }
	var sets, removes []string
	set := func(key, value string) {
		sets = append(sets, fmt.Sprintf("JSONPatch{op: 'add', path: %s, value: %s}", annotationPath(key), value))
		removes = append(removes, fmt.Sprintf("(%s in object.metadata.annotations ? [JSONPatch{op: 'remove', path: %s}] : [])", q(key), annotationPath(key)))
	}
	set(deckhandv1alpha1.SidecarSetInjectedAnnotation, kept("entries")+".map(e, e.substring(1, e.indexOf('\":{'))).join(',')")
	set(deckhandv1alpha1.SidecarSetHashAnnotation, "'{' + "+kept("entries")+".join(',') + '}'")
	set(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation, "'{' + "+kept("entriesWI")+".join(',') + '}'")
	return fmt.Sprintf("%s.size() == 0 ? %s : [%s]", kept("entries"), strings.Join(removes, " + "), strings.Join(sets, ", "))
}

// freshCondition: the pod carries no injection record, the common case (a
// pod a workload controller creates from its template). Then no peer has
// injected anything yet, every sidecar name the pod has is the pod's own
// (so any clash keeps the SidecarSet out), and every item of the
// SidecarSet goes at a place known when compiling: the fresh patch needs
// none of the variables that parse the record or count peers, which is
// what the API server spends its time on per pod.
var freshCondition = fmt.Sprintf("!has(object.metadata.annotations) || !(%s in object.metadata.annotations || %s in object.metadata.annotations)",
	q(deckhandv1alpha1.SidecarSetHashAnnotation), q(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation))

// freshPatch is the patch for a pod without a record (freshCondition).
func (c *compiler) freshPatch(bi, ai, bc, ac []sidecarLit) string {
	var ops []string
	add := func(path, value string) {
		ops = append(ops, fmt.Sprintf("[JSONPatch{op: 'add', path: %s, value: %s}]", path, value))
	}
	addIf := func(cond, path, value string) {
		ops = append(ops, fmt.Sprintf("(%s ? [JSONPatch{op: 'add', path: %s, value: %s}] : [])", cond, path, value))
	}
	names := strList(c.names)
	clash := fmt.Sprintf("(has(object.spec.containers) && object.spec.containers.exists(x, x.name in %[1]s)) || (has(object.spec.initContainers) && object.spec.initContainers.exists(x, x.name in %[1]s))", names)
	for _, l := range []struct {
		field         string
		before, after []sidecarLit
	}{{"initContainers", bi, ai}, {"containers", bc, ac}} {
		if len(l.before)+len(l.after) == 0 {
			continue
		}
		path := "/spec/" + l.field
		addIf(fmt.Sprintf("!has(object.spec.%s)", l.field), q(path), "[]")
		for i := len(l.before) - 1; i >= 0; i-- {
			add(q(path+"/0"), l.before[i].value)
		}
		for i := range l.after {
			add(q(path+"/-"), l.after[i].value)
		}
	}
	for _, l := range []struct {
		field string
		items []sidecarLit
	}{
		{"volumes", c.items(len(c.s.Spec.Volumes), func(i int) (string, any) { return c.s.Spec.Volumes[i].Name, &c.s.Spec.Volumes[i] })},
		{"imagePullSecrets", c.items(len(c.s.Spec.ImagePullSecrets), func(i int) (string, any) { return c.s.Spec.ImagePullSecrets[i].Name, &c.s.Spec.ImagePullSecrets[i] })},
	} {
		if len(l.items) == 0 {
			continue
		}
		path := "/spec/" + l.field
		addIf(fmt.Sprintf("!has(object.spec.%s)", l.field), q(path), "[]")
		for i, it := range l.items {
			if slices.ContainsFunc(l.items[:i], func(o sidecarLit) bool { return o.name == it.name }) {
				continue // a name listed twice is added once
			}
			addIf(fmt.Sprintf("!has(object.spec.%[1]s) || !object.spec.%[1]s.exists(x, x.name == %[2]s)", l.field, q(it.name)), q(path+"/-"), it.value)
		}
	}
	ops = append(ops, gateOps()...)
	addIf("!has(object.metadata.annotations)", q("/metadata/annotations"), "dyn({})")
	add(annotationPath(deckhandv1alpha1.SidecarSetInjectedAnnotation), q(c.s.Name))
	add(annotationPath(deckhandv1alpha1.SidecarSetHashAnnotation), q(fmt.Sprintf(`{"%s":{"hash":"%s","containers":[%s]}}`, c.s.Name, c.hash, quotedJoin(c.names))))
	add(annotationPath(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation), q(fmt.Sprintf(`{"%s":{"hash":"%s"}}`, c.s.Name, c.wi)))
	return fmt.Sprintf("(%s) ? [] :\n", clash) + strings.Join(ops, " +\n")
}

// gateOps list the in-place update gate among the pod's readiness gates,
// once, as the webhook does for a pod it injects: a SidecarSet's in-place
// update takes the pod out of its endpoints through it
// (internal/inplacegate). Another SidecarSet's policy, or the pod, may
// have listed it already.
func gateOps() []string {
	gate := q(string(inplacegate.ConditionType))
	return []string{
		"(!has(object.spec.readinessGates) ? [JSONPatch{op: 'add', path: '/spec/readinessGates', value: []}] : [])",
		fmt.Sprintf("(has(object.spec.readinessGates) && object.spec.readinessGates.exists(g, g.conditionType == %[1]s) ? [] :"+
			" [JSONPatch{op: 'add', path: '/spec/readinessGates/-', value: {%[2]s: dyn(%[1]s)}}])", gate, q("conditionType")),
	}
}

// annotationPath is the JSON patch path (a CEL literal) of annotation k.
func annotationPath(k string) string {
	return q("/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
}

func suffix(field string) string {
	if field == "initContainers" {
		return "Init"
	}
	return ""
}

// sidecarLit is one item to add: its name and its CEL value.
type sidecarLit struct{ name, value string }

func (c *compiler) items(n int, at func(int) (string, any)) []sidecarLit {
	out := make([]sidecarLit, 0, n)
	for i := 0; i < n; i++ {
		name, v := at(i)
		out = append(out, sidecarLit{name: name, value: lit(mustJSON(v))})
	}
	return out
}

// sidecars returns the CEL values of list's containers, split by placement:
// the container as the webhook encodes it, with env and volumeMounts taken
// from the variables when it transfers env or shares volumes.
func (c *compiler) sidecars(list []deckhandv1alpha1.SidecarContainer, prefix string) (before, after []sidecarLit) {
	for i := range list {
		sc := &list[i]
		id := fmt.Sprintf("%s%d", prefix, i)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(mustJSON(&sc.Container)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			panic(err) // encoded just now
		}
		fields := map[string]string{}
		for k, v := range m {
			fields[k] = lit(v)
		}
		if len(sc.TransferEnv) > 0 {
			fields["env"] = "variables.env_" + id
		}
		if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
			fields["volumeMounts"] = "variables.mounts_" + id
		}
		it := sidecarLit{name: sc.Name, value: mapLit(fields)}
		if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
			after = append(after, it)
		} else {
			before = append(before, it)
		}
	}
	return before, after
}
