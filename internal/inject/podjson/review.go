package podjson

// Review is the part of an AdmissionReview request the pod webhook reads,
// decoded in one pass by the same scanner as RawPod. Object aliases the
// request body.
type Review struct {
	// APIVersion and Kind of the AdmissionReview itself: the response
	// must carry the request's.
	APIVersion, Kind string
	UID              string
	// ObjectKind is request.kind.kind (for example "Pod").
	ObjectKind                        string
	Operation, SubResource, Namespace string
	Name                              string
	DryRun                            bool
	// UserName is request.userInfo.username: who the API server
	// authenticated (it fills userInfo itself; a client cannot set it).
	UserName string
	Object   []byte // request.object, raw; nil if absent or null
}

// DecodeReview reads what the pod webhook needs from an AdmissionReview's
// JSON into r. Fields it does not need (oldObject, the rest of userInfo,
// options, ...)
// are skipped, not decoded.
func DecodeReview(body []byte, r *Review) error {
	s := &scanner{b: body}
	// A null review reads as an empty one, as typed decoding has it.
	for key := range s.members() {
		switch string(key) {
		case "apiVersion":
			r.APIVersion = s.string()
		case "kind":
			r.Kind = s.string()
		case "request":
			s.request(r)
		default:
			s.skip()
		}
	}
	return s.end()
}

func (s *scanner) request(r *Review) {
	for key := range s.members() {
		switch string(key) {
		case "uid":
			r.UID = s.string()
		case "kind":
			r.ObjectKind = s.memberOf("kind")
		case "operation":
			r.Operation = s.string()
		case "subResource":
			r.SubResource = s.string()
		case "namespace":
			r.Namespace = s.string()
		case "name":
			r.Name = s.string()
		case "dryRun":
			r.DryRun = s.boolean()
		case "userInfo":
			r.UserName = s.memberOf("username")
		case "object":
			r.Object = s.raw()
		default:
			s.skip()
		}
	}
}

// boolean reads true, false or null (false).
func (s *scanner) boolean() bool {
	if s.null() {
		return false
	}
	s.ws()
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false
	}
	s.fail()
	return false
}
