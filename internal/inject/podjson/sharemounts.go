package podjson

import (
	"path"
	"regexp"
	"strings"
)

// shareMounts returns own followed by every mount of the pod's app
// containers that the sidecar does not mount itself, and env followed by
// the variables those mounts' subPathExpr use. What the sidecar shares is
// the app's files, never a say over its own:
//
//   - mount paths are compared cleaned (path.Clean): "/etc/envoy/" and
//     "/etc//envoy" are the sidecar's "/etc/envoy";
//   - an app mount at or under one of the sidecar's own mount paths is not
//     shared, so the app cannot lay its files over the sidecar's;
//   - of two app mounts at one cleaned path, the first is shared;
//   - unless writable, a shared mount is readOnly in the sidecar;
//   - a shared mount's subPathExpr expands in the sidecar as in the app:
//     each variable it names that the sidecar's env does not define is
//     copied from the app container the mount is from.
func (a *appContainers) shareMounts(own, env []rawElement, writable bool) (mounts, outEnv []rawElement, err error) {
	taken := make([]string, 0, len(own)+4)
	for _, m := range own {
		taken = append(taken, path.Clean(m.key))
	}
	ownPaths := len(taken)
	mounts, outEnv = own, env
	copied := false
	for i := range a.pod.Containers {
		ms, err := elements(a.pod.Containers[i].volumeMounts, "mountPath")
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			p := path.Clean(m.key)
			if under(p, taken[:ownPaths]) || contains(taken[ownPaths:], p) {
				continue
			}
			taken = append(taken, p)
			shared, expr, err := sharedMountJSON(m.raw, writable)
			if err != nil {
				return nil, nil, err
			}
			if !copied {
				mounts, copied = append([]rawElement(nil), own...), true
			}
			mounts = append(mounts, rawElement{key: m.key, raw: shared})
			if expr != "" {
				if outEnv, err = a.subPathEnv(outEnv, expr, i); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return mounts, outEnv, nil
}

// under reports whether p is one of paths or below one of them.
func under(p string, paths []string) bool {
	for _, q := range paths {
		if p == q || q == "/" || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// sharedMountJSON returns the mount as the sidecar gets it (readOnly unless
// writable) and its subPathExpr ("" if none).
func sharedMountJSON(raw []byte, writable bool) ([]byte, string, error) {
	// One pass of the scanner over the mount object, no decoding into a
	// map: this runs for every app mount of every pod a sharing SidecarSet
	// selects, and decoding and re-encoding each one tripled the
	// allocations of an admission (BenchmarkInject).
	s := &scanner{b: raw}
	if s.peek() != '{' {
		s.fail()
		return nil, "", s.err
	}
	var expr string
	roStart, roEnd := -1, -1
	members := false
	for key := range s.members() {
		members = true
		switch string(key) {
		case "subPathExpr":
			expr = s.string()
		case "readOnly":
			s.ws()
			roStart = s.i
			s.skip()
			roEnd = s.i
		default:
			s.skip()
		}
	}
	if s.err != nil {
		return nil, "", s.err
	}
	if writable || (roStart >= 0 && string(raw[roStart:roEnd]) == "true") {
		return raw, expr, nil
	}
	if roStart >= 0 {
		out := make([]byte, 0, len(raw)+4)
		out = append(out, raw[:roStart]...)
		out = append(out, "true"...)
		return append(out, raw[roEnd:]...), expr, nil
	}
	// The closing brace is the last byte the scanner consumed.
	end := s.i - 1
	out := make([]byte, 0, end+len(`,"readOnly":true}`))
	out = append(out, raw[:end]...)
	if members {
		out = append(out, ',')
	}
	out = append(out, `"readOnly":true}`...)
	return out, expr, nil
}

// subPathExprVar matches a variable reference of a subPathExpr, $(NAME), as
// the kubelet expands it.
var subPathExprVar = regexp.MustCompile(`\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`)

// subPathEnv returns env followed by each variable expr uses that env does
// not define, copied from the app container at index container (when it
// defines it).
func (a *appContainers) subPathEnv(env []rawElement, expr string, container int) ([]rawElement, error) {
	var src []rawElement
	loaded := false
	for _, ref := range subPathExprVar.FindAllStringSubmatch(expr, -1) {
		name := ref[1]
		if keyIndex(env, name) >= 0 {
			continue
		}
		if !loaded {
			var err error
			if src, err = elements(a.pod.Containers[container].env, "name"); err != nil {
				return nil, err
			}
			loaded = true
		}
		if i := keyIndex(src, name); i >= 0 {
			env = append(env[:len(env):len(env)], src[i])
		}
	}
	return env, nil
}
