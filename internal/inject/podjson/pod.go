package podjson

import "errors"

// RawPod is the part of a pod that injection reads, decoded by a small
// single-pass scanner straight from the admission request's raw JSON. The
// app containers' env and volumeMounts stay raw (slices of the request) and
// are only looked at when a sidecar transfers env or shares volumes.
type RawPod struct {
	Name, GenerateName, Namespace string
	Labels                        map[string]string
	Annotations                   map[string]string
	// HasAnnotations, HasInitContainers, HasVolumes and
	// HasImagePullSecrets tell whether the list or map is present (even
	// empty): a patch appends to a present one and creates an absent one.
	HasAnnotations bool
	// HasLabels likewise for metadata.labels.
	HasLabels bool

	hasSpec                    bool
	InitContainers, Containers []RawContainer
	HasInitContainers          bool
	Volumes                    []string // names
	HasVolumes                 bool
	ImagePullSecrets           []string // names
	HasImagePullSecrets        bool
	ReadinessGates             []string // condition types
	HasReadinessGates          bool
}

// RawContainer is one container of a RawPod.
type RawContainer struct {
	Name         string
	env          []byte // raw JSON array or nil
	volumeMounts []byte // raw JSON array or nil
	// volumeDevices is kept raw like the two above: slicing it costs what
	// skipping it would; it is split only for a sidecar that shares devices.
	volumeDevices []byte // raw JSON array or nil
	// resources, raw, is decoded only for a sidecar with a resourcesPolicy.
	resources []byte // raw JSON object or nil
}

// ErrNoSpec: a pod without a spec object has nowhere to put a sidecar. The
// API server never sends one (spec.containers is required), but a webhook
// must not answer it with a patch that cannot apply.
var ErrNoSpec = errors.New("the pod has no spec object")

// HasContainer reports whether the pod has a container or init container
// called name.
func (p *RawPod) HasContainer(name string) bool {
	for _, list := range [][]RawContainer{p.Containers, p.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return true
			}
		}
	}
	return false
}

// DecodePod reads what injection needs from a pod's JSON into p.
func DecodePod(raw []byte, p *RawPod) error {
	s := &scanner{b: raw}
	if s.peek() != '{' {
		return ErrSyntax
	}
	for key := range s.members() {
		switch string(key) {
		case "metadata":
			s.metadata(p)
		case "spec":
			s.spec(p)
		default:
			s.skip()
		}
	}
	if s.err == nil && !p.hasSpec {
		return ErrNoSpec
	}
	return s.end()
}

func (s *scanner) metadata(p *RawPod) {
	for key := range s.members() {
		switch string(key) {
		case "name":
			p.Name = s.string()
		case "generateName":
			p.GenerateName = s.string()
		case "namespace":
			p.Namespace = s.string()
		case "labels":
			p.Labels, p.HasLabels = s.stringMap()
		case "annotations":
			p.Annotations, p.HasAnnotations = s.stringMap()
		default:
			s.skip()
		}
	}
}

func (s *scanner) spec(p *RawPod) {
	p.hasSpec = s.peek() == '{'
	for key := range s.members() {
		switch string(key) {
		case "containers":
			p.Containers, _ = s.containers()
		case "initContainers":
			p.InitContainers, p.HasInitContainers = s.containers()
		case "volumes":
			p.Volumes, p.HasVolumes = s.names()
		case "imagePullSecrets":
			p.ImagePullSecrets, p.HasImagePullSecrets = s.names()
		case "readinessGates":
			p.ReadinessGates, p.HasReadinessGates = s.valuesOf("conditionType")
		default:
			s.skip()
		}
	}
}

func (s *scanner) containers() ([]RawContainer, bool) {
	if !s.begin('[') {
		return nil, false
	}
	out := make([]RawContainer, 0, 8)
	for first := true; s.more(&first, ']'); {
		var c RawContainer
		for key := range s.members() {
			switch string(key) {
			case "name":
				c.Name = s.string()
			case "env":
				c.env = s.raw()
			case "volumeMounts":
				c.volumeMounts = s.raw()
			case "volumeDevices":
				c.volumeDevices = s.raw()
			case "resources":
				c.resources = s.raw()
			default:
				s.skip()
			}
		}
		out = append(out, c)
	}
	return out, true
}

// names reads an array of objects and returns their "name" members.
func (s *scanner) names() ([]string, bool) {
	return s.valuesOf("name")
}

// valuesOf reads an array of objects and returns their string members
// called key.
func (s *scanner) valuesOf(key string) ([]string, bool) {
	if !s.begin('[') {
		return nil, false
	}
	out := make([]string, 0, 8)
	for first := true; s.more(&first, ']'); {
		out = append(out, s.memberOf(key))
	}
	return out, true
}

// memberOf reads an object and returns its string member called key.
func (s *scanner) memberOf(key string) string {
	v := ""
	for k := range s.members() {
		if string(k) == key {
			v = s.string()
		} else {
			s.skip()
		}
	}
	return v
}

// rawElement is one element of a raw JSON array with the string member the
// injector keys it by (an env var's name, a mount's mountPath).
type rawElement struct {
	key string
	raw []byte
}

// elements splits a raw JSON array of objects into its elements.
func elements(raw []byte, key string) ([]rawElement, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	s := &scanner{b: raw}
	if !s.begin('[') {
		return nil, s.err
	}
	out := make([]rawElement, 0, 4)
	for first := true; s.more(&first, ']'); {
		s.ws()
		start := s.i
		k := s.memberOf(key)
		out = append(out, rawElement{key: k, raw: raw[start:s.i]})
	}
	return out, s.err
}
