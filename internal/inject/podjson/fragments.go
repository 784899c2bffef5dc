package podjson

import (
	"encoding/json"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Fragments are a SidecarSet's injectable parts, JSON-encoded once per
// generation so that admitting a pod copies bytes instead of encoding
// containers again. Index i of each list is item i of the spec's list.
type Fragments struct {
	InitContainers   []ContainerFragment
	Containers       []ContainerFragment
	Volumes          [][]byte
	ImagePullSecrets [][]byte
}

// ContainerFragment is one sidecar, encoded.
type ContainerFragment struct {
	// full is the container as injected when no policy changes it.
	full []byte
	// base is the container without env and volumeMounts; env and mounts
	// are its own, element by element, for splicing in transferred env and
	// shared mounts. base is nil when the sidecar neither transfers env nor
	// shares volumes.
	base    []byte
	env     []rawElement // keyed by name
	mounts  []rawElement // keyed by mountPath
	devices []rawElement // keyed by devicePath
}

// EncodeFragments encodes the injectable parts of spec.
func EncodeFragments(spec *deckhandv1alpha1.SidecarSetSpec) *Fragments {
	f := &Fragments{}
	for i := range spec.InitContainers {
		f.InitContainers = append(f.InitContainers, encodeContainer(&spec.InitContainers[i]))
	}
	for i := range spec.Containers {
		f.Containers = append(f.Containers, encodeContainer(&spec.Containers[i]))
	}
	for i := range spec.Volumes {
		f.Volumes = append(f.Volumes, mustJSON(&spec.Volumes[i]))
	}
	for i := range spec.ImagePullSecrets {
		f.ImagePullSecrets = append(f.ImagePullSecrets, mustJSON(&spec.ImagePullSecrets[i]))
	}
	return f
}

func encodeContainer(sc *deckhandv1alpha1.SidecarContainer) ContainerFragment {
	e := ContainerFragment{full: mustJSON(&sc.Container)}
	if len(sc.TransferEnv) == 0 && sc.ShareVolumePolicy.Type != deckhandv1alpha1.ShareVolumePolicyEnabled && !sharesDevices(sc) && sc.ResourcesPolicy == nil {
		return e
	}
	base := sc.Container
	base.Env, base.VolumeMounts, base.VolumeDevices = nil, nil, nil
	e.base = mustJSON(&base)
	if sc.ResourcesPolicy != nil {
		e.base = withoutMember(e.base, "resources")
	}
	for i := range sc.VolumeDevices {
		e.devices = append(e.devices, rawElement{key: sc.VolumeDevices[i].DevicePath, raw: mustJSON(&sc.VolumeDevices[i])})
	}
	for i := range sc.Env {
		e.env = append(e.env, rawElement{key: sc.Env[i].Name, raw: mustJSON(&sc.Env[i])})
	}
	for i := range sc.VolumeMounts {
		e.mounts = append(e.mounts, rawElement{key: sc.VolumeMounts[i].MountPath, raw: mustJSON(&sc.VolumeMounts[i])})
	}
	return e
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Everything encoded here was decoded from JSON by the API server.
		panic(err)
	}
	return b
}

// Sidecar is a sidecar chosen for a pod: its spec, which says how env and
// volumes are shared, and its encoded form.
type Sidecar struct {
	Spec     *deckhandv1alpha1.SidecarContainer
	Fragment *ContainerFragment
	// Resources is the JSON of the resources a resourcesPolicy computed for
	// this pod (nil: none).
	Resources []byte
}

// size is about the number of bytes the sidecar adds to a patch.
func (sc Sidecar) size(pod *RawPod) int {
	n := len(sc.Fragment.full) + 64
	if sc.Spec.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
		for i := range pod.Containers {
			n += len(pod.Containers[i].volumeMounts)
		}
	}
	if sharesDevices(sc.Spec) {
		for i := range pod.Containers {
			n += len(pod.Containers[i].volumeDevices)
		}
	}
	return n
}

// appContainers gives lazy access to the env and mounts of the pod's own
// containers, split only when a sidecar transfers env or shares volumes.
type appContainers struct {
	pod *RawPod
}

func (a *appContainers) env(container string) ([]rawElement, error) {
	for _, list := range [][]RawContainer{a.pod.Containers, a.pod.InitContainers} {
		for i := range list {
			if list[i].Name == container {
				return elements(list[i].env, "name")
			}
		}
	}
	return nil, nil
}

// appendContainer appends the JSON of the sidecar to inject: its encoded
// form, or, when it transfers env or shares volumes, its base with the
// resulting env and volumeMounts spliced in.
func (a *appContainers) appendContainer(buf []byte, sc Sidecar) ([]byte, error) {
	spec, enc := sc.Spec, sc.Fragment
	if enc.base == nil {
		return append(buf, enc.full...), nil
	}
	env := enc.env
	if len(spec.TransferEnv) > 0 {
		var err error
		if env, err = a.transferEnv(spec.TransferEnv, enc.env); err != nil {
			return nil, err
		}
	}
	mounts := enc.mounts
	if spec.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
		var err error
		if mounts, env, err = a.shareMounts(enc.mounts, env, spec.ShareVolumePolicy.Writable); err != nil {
			return nil, err
		}
	}
	devices := enc.devices
	if sharesDevices(spec) {
		var err error
		if devices, err = a.shareDevices(enc.devices); err != nil {
			return nil, err
		}
	}
	buf = append(buf, enc.base[:len(enc.base)-1]...) // without the closing brace
	buf = appendRawList(buf, `,"env":`, env)
	buf = appendRawList(buf, `,"volumeMounts":`, mounts)
	buf = appendRawList(buf, `,"volumeDevices":`, devices)
	if sc.Resources != nil {
		buf = append(buf, `,"resources":`...)
		buf = append(buf, sc.Resources...)
	}
	return append(buf, '}'), nil
}

// transferEnv returns own followed by each transferred variable the source
// container has and env does not have yet: a variable the sidecar defines
// itself keeps the sidecar's value, and of two transfers of one name the
// first wins. This is OpenKruise's MergeEnvVar(own, transferred), which its
// e2e suite asserts; the Policy mode's CEL (sidecarpolicy) does the same.
func (a *appContainers) transferEnv(transfers []deckhandv1alpha1.TransferEnvVar, own []rawElement) ([]rawElement, error) {
	env := append([]rawElement(nil), own...)
	for i := range transfers {
		t := &transfers[i]
		name := sidecarcontrol.TransferSource(t, a.pod.Labels, a.pod.Annotations)
		if name == "" {
			continue
		}
		src, err := a.env(name)
		if err != nil {
			return nil, err
		}
		for _, want := range sidecarcontrol.TransferEnvNames(t) {
			if keyIndex(env, want) >= 0 {
				continue
			}
			if i := keyIndex(src, want); i >= 0 {
				env = append(env, src[i])
			}
		}
	}
	return env, nil
}

// keyIndex returns the index of the first element of list keyed key, or -1.
func keyIndex(list []rawElement, key string) int {
	for i := range list {
		if list[i].key == key {
			return i
		}
	}
	return -1
}

func appendRawList(buf []byte, prefix string, list []rawElement) []byte {
	if len(list) == 0 {
		return buf
	}
	buf = append(buf, prefix...)
	buf = append(buf, '[')
	for i, e := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, e.raw...)
	}
	return append(buf, ']')
}

// sharesDevices reports whether the sidecar gets the app containers'
// volumeDevices (shareVolumeDevicePolicy enabled).
func sharesDevices(sc *deckhandv1alpha1.SidecarContainer) bool {
	return sc.ShareVolumeDevicePolicy != nil && sc.ShareVolumeDevicePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled
}

// shareDevices returns own followed by every volumeDevice of the pod's app
// containers at a devicePath not taken yet.
func (a *appContainers) shareDevices(own []rawElement) ([]rawElement, error) {
	devices := append([]rawElement(nil), own...)
	for i := range a.pod.Containers {
		ds, err := elements(a.pod.Containers[i].volumeDevices, "devicePath")
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			taken := false
			for j := range devices {
				if devices[j].key == d.key {
					taken = true
					break
				}
			}
			if !taken {
				devices = append(devices, d)
			}
		}
	}
	return devices, nil
}
