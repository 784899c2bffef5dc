package sidecarpolicy

// The compiled policy's CEL variables: the pod's injection records read and
// rewritten, and what this SidecarSet adds, each evaluated once per
// admission for the mutations of patch.go to use.

import (
	"fmt"
	"path"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// variables are evaluated lazily, once per admission, in this order.
func (c *compiler) variables() []admissionregistrationv1.Variable {
	var vs []admissionregistrationv1.Variable
	add := func(name, expr string) {
		vs = append(vs, admissionregistrationv1.Variable{Name: name, Expression: expr})
	}
	ann := func(key, re string) string {
		return fmt.Sprintf("has(object.metadata.annotations) && %[1]s in object.metadata.annotations && object.metadata.annotations[%[1]s].matches(%[2]s) ? object.metadata.annotations[%[1]s] : '{}'", q(key), q(re))
	}
	entries := func(v string) string {
		return fmt.Sprintf("variables.%[1]s == '{}' ? [] : variables.%[1]s.substring(1, variables.%[1]s.size() - 1).split('},').map(e, e.endsWith('}') ? e : e + '}')", v)
	}
	add("rec", ann(deckhandv1alpha1.SidecarSetHashAnnotation, reRecord))
	add("recWI", ann(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation, reRecordWI))
	add("entries", entries("rec"))
	add("entriesWI", entries("recWI"))
	// Note: the policy runs once per admission (reinvocation Never), so an
	// entry of this SidecarSet's own in the record of a pod being created
	// came with the pod: it is not trusted (its containers are the pod's
	// own), and the record is written again without it.
	add("containers", "has(object.spec.containers) ? object.spec.containers : []")
	add("initContainers", "has(object.spec.initContainers) ? object.spec.initContainers : []")
	add("containerNames", "variables.containers.map(x, x.name)")
	add("initNames", "variables.initContainers.map(x, x.name)")
	add("names", "variables.containerNames + variables.initNames")
	add("volumeNames", "has(object.spec.volumes) ? object.spec.volumes.map(x, x.name) : []")
	add("secretNames", "has(object.spec.imagePullSecrets) ? object.spec.imagePullSecrets.map(x, x.name) : []")
	// A container of the same name the pod brought itself keeps the
	// SidecarSet out entirely, as in the webhook.
	add("clash", fmt.Sprintf("%s.exists(n, n in variables.names)", strList(c.names)))
	var peerNames []string
	for _, p := range c.peers {
		peerNames = append(peerNames, p.name)
	}
	add("applied", fmt.Sprintf(`%s.filter(k, variables.rec.contains('{"' + k + '":{') || variables.rec.contains(',"' + k + '":{'))`, strList(peerNames)))
	// The containers the applied peers injected, which are not the pod's own.
	owned := []string{"[]"}
	for _, p := range c.peers {
		if len(p.all) > 0 {
			owned = append(owned, fmt.Sprintf("(%s in variables.applied ? %s : [])", q(p.name), strList(p.all)))
		}
	}
	add("peerOwned", strings.Join(owned, " + "))
	add("appContainers", "variables.containers.filter(x, !(x.name in variables.peerOwned))")
	add("appAll", "variables.appContainers + variables.initContainers.filter(x, !(x.name in variables.peerOwned))")
	add("appMounts", "variables.appContainers.map(x, has(x.volumeMounts) ? x.volumeMounts : []).flatten()")
	// The app's mount paths without empty and "." segments: what
	// path.Clean makes of them in the webhook, but for ".." (a path with a
	// ".." segment is not shared here).
	add("appMountPaths", "variables.appMounts.map(m, '/' + m.mountPath.split('/').filter(s, s != '' && s != '.').join('/'))")

	count := func(pick func(peer) ([]string, bool), present string) string {
		terms := []string{"0"}
		for _, p := range c.peers {
			if names, ok := pick(p); ok && len(names) > 0 {
				terms = append(terms, fmt.Sprintf("(%s in variables.applied ? %s.filter(n, n in variables.%s).size() : 0)", q(p.name), strList(names), present))
			}
		}
		return strings.Join(terms, " + ")
	}
	add("initLow", count(func(p peer) ([]string, bool) { return p.beforeInit, p.before }, "initNames"))
	add("initHigh", count(func(p peer) ([]string, bool) { return p.afterInit, p.after }, "initNames"))
	add("containerLow", count(func(p peer) ([]string, bool) { return p.beforeC, p.before }, "containerNames"))
	add("containerHigh", count(func(p peer) ([]string, bool) { return p.afterC, p.after }, "containerNames"))
	add("volumeHigh", count(func(p peer) ([]string, bool) { return p.volumes, p.after }, "volumeNames"))
	add("secretHigh", count(func(p peer) ([]string, bool) { return p.secrets, p.after }, "secretNames"))

	bi, ai := split(c.s.Spec.InitContainers)
	bc, ac := split(c.s.Spec.Containers)
	missing := func(names []string, present string) string {
		return fmt.Sprintf("%s.filter(n, !(n in variables.%s)).size()", strList(names), present)
	}
	add("newBeforeInit", missing(bi, "names"))
	add("newAfterInit", missing(ai, "names"))
	add("newBefore", missing(bc, "names"))
	add("newAfter", missing(ac, "names"))
	var vols, secs []string
	for i := range c.s.Spec.Volumes {
		vols = append(vols, c.s.Spec.Volumes[i].Name)
	}
	for _, ps := range c.s.Spec.ImagePullSecrets {
		secs = append(secs, ps.Name)
	}
	add("newVolumes", missing(vols, "volumeNames"))
	add("newSecrets", missing(secs, "secretNames"))
	add("adds", "variables.newBeforeInit + variables.newAfterInit + variables.newBefore + variables.newAfter + variables.newVolumes + variables.newSecrets > 0")
	// As the webhook: nothing to add.
	add("skip", "variables.clash || !variables.adds")

	// Env transfers and shared mounts, sidecar by sidecar.
	for _, l := range []struct {
		prefix string
		list   []deckhandv1alpha1.SidecarContainer
	}{{"i", c.s.Spec.InitContainers}, {"c", c.s.Spec.Containers}} {
		for i := range l.list {
			sc := &l.list[i]
			id := fmt.Sprintf("%s%d", l.prefix, i)
			if len(sc.TransferEnv) > 0 {
				// As the webhook (podjson): a transferred variable is appended
				// unless the env has it already, so the sidecar's own value
				// wins, and of two transfers of one name the first. A name
				// the sidecar defines itself is known here and costs no CEL.
				env := listLit(sc.Env)
				for k, t := range sc.TransferEnv {
					if definesEnv(sc, t.EnvName) {
						continue
					}
					src := fmt.Sprintf("variables.appAll.filter(x, x.name == %s).map(x, has(x.env) ? x.env.filter(e, e.name == %s) : [])", q(t.SourceContainerName), q(t.EnvName))
					add(fmt.Sprintf("src_%s_%d", id, k), fmt.Sprintf("%s.size() == 0 ? [] : %s[0]", src, src))
					s := fmt.Sprintf("variables.src_%s_%d", id, k)
					add(fmt.Sprintf("env_%s_%d", id, k), fmt.Sprintf("%[1]s.size() == 0 || %[2]s.exists(e, e.name == %[3]s) ? %[2]s : %[2]s + [%[1]s[0]]",
						s, "dyn("+env+")", q(t.EnvName)))
					env = fmt.Sprintf("variables.env_%s_%d", id, k)
				}
				add("env_"+id, env)
			}
			if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
				add("mounts_"+id, sharedMounts(sc))
			}
		}
	}

	// The record with this SidecarSet's entry at its place in name order.
	mine := fmt.Sprintf(`"%s":{"hash":"%s","containers":[%s]}`, c.s.Name, c.hash, quotedJoin(c.names))
	mineWI := fmt.Sprintf(`"%s":{"hash":"%s"}`, c.s.Name, c.wi)
	key := `e.substring(1, e.indexOf('":{'))`
	merged := func(v, entry string) string {
		return fmt.Sprintf("variables.%[1]s.filter(e, %[2]s < %[3]s) + [%[4]s] + variables.%[1]s.filter(e, %[2]s > %[3]s)", v, key, q(c.s.Name), q(entry))
	}
	add("newEntries", merged("entries", mine))
	add("newEntriesWI", merged("entriesWI", mineWI))
	return vs
}

// definesEnv reports whether sc's own env has a variable called name.
func definesEnv(sc *deckhandv1alpha1.SidecarContainer, name string) bool {
	for i := range sc.Env {
		if sc.Env[i].Name == name {
			return true
		}
	}
	return false
}

// sharedMounts is the CEL of a sharing sidecar's volumeMounts: its own,
// then the app's as the webhook shares them (podjson's shareMounts): none
// at or under one of the sidecar's own paths, the first of two at one
// path, readOnly unless writable. Two differences, both leaving a mount
// out rather than sharing a wrong one: a path with a ".." segment, and a
// subPathExpr (whose variables the webhook copies into the sidecar's env),
// are not shared.
func sharedMounts(sc *deckhandv1alpha1.SidecarContainer) string {
	const m, p = "variables.appMounts[k]", "variables.appMountPaths[k]"
	conds := []string{
		fmt.Sprintf("(!has(%[1]s.subPathExpr) || %[1]s.subPathExpr == '')", m),
		fmt.Sprintf("!%s.mountPath.split('/').exists(s, s == '..')", m),
		fmt.Sprintf("!lists.range(k).exists(j, variables.appMountPaths[j] == %s)", p),
	}
	for _, own := range sc.VolumeMounts {
		o := path.Clean(own.MountPath)
		if o == "/" {
			conds = append(conds, "false")
			continue
		}
		conds = append(conds, fmt.Sprintf("%[1]s != %[2]s && !%[1]s.startsWith(%[3]s)", p, q(o), q(o+"/")))
	}
	mount := m
	if !sc.ShareVolumePolicy.Writable {
		mount = fmt.Sprintf(`{"name": dyn(%[1]s.name), "mountPath": dyn(%[1]s.mountPath), "readOnly": dyn(true), ?"subPath": %[1]s.?subPath, ?"mountPropagation": %[1]s.?mountPropagation, ?"recursiveReadOnly": %[1]s.?recursiveReadOnly}`, m)
	}
	return fmt.Sprintf("dyn(%s) + lists.range(variables.appMounts.size()).filter(k, %s).map(k, %s)", listLit(sc.VolumeMounts), strings.Join(conds, " && "), mount)
}
