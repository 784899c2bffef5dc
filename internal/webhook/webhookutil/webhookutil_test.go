package webhookutil

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestCheck: every message of the check becomes an Invalid error at the
// path holding the value; a value the check accepts gives none.
func TestCheck(t *testing.T) {
	p := field.NewPath("spec", "name")
	if errs := Check(p, "web", validation.IsDNS1123Label); len(errs) != 0 {
		t.Errorf("a valid name: unexpected %v", errs)
	}
	want := validation.IsDNS1123Label("Web_1")
	errs := Check(p, "Web_1", validation.IsDNS1123Label)
	if len(want) == 0 || len(errs) != len(want) {
		t.Fatalf("errors %v, want one for each of %q", errs, want)
	}
	for i, e := range errs {
		if e.Type != field.ErrorTypeInvalid || e.Field != "spec.name" || e.BadValue != "Web_1" || e.Detail != want[i] {
			t.Errorf("error %d: %#v, want Invalid at spec.name of Web_1 saying %q", i, e, want[i])
		}
	}
}

func TestValidateIntOrPercent(t *testing.T) {
	p := field.NewPath("spec", "x")
	for _, tc := range []struct {
		v         intstr.IntOrString
		minimum   int
		atMost100 bool
		want      string // a part of the error, "" for none
	}{
		{intstr.FromInt32(0), 0, true, ""},
		{intstr.FromInt32(0), 1, true, "must be at least 1"},
		{intstr.FromInt32(500), 1, true, ""},
		{intstr.FromString("0%"), 1, true, "between 1% and 100%"},
		{intstr.FromString("100%"), 1, true, ""},
		{intstr.FromString("101%"), 0, true, "between 0% and 100%"},
		{intstr.FromString("200%"), 0, false, ""},
		{intstr.FromString("5 %"), 0, false, "an integer or a percentage"},
		{intstr.FromString("-5%"), 0, false, "an integer or a percentage"},
	} {
		errs := ValidateIntOrPercent(&tc.v, p, tc.minimum, tc.atMost100)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s (min %d): unexpected %v", tc.v.String(), tc.minimum, errs)
		case tc.want != "" && (len(errs) != 1 || errs[0].Field != "spec.x" || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s (min %d): errors %v, want one on spec.x saying %q", tc.v.String(), tc.minimum, errs, tc.want)
		}
	}
}

func TestCauseError(t *testing.T) {
	for _, tc := range []struct {
		cause metav1.StatusCause
		want  string
	}{
		{metav1.StatusCause{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value"}, "f: Required value"},
		{metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "x": bad`}, `f: Invalid value: "x": bad`},
		{metav1.StatusCause{Type: "Odd", Message: "something else"}, "f: Invalid value: something else"},
	} {
		if got := CauseError(tc.cause, "f").Error(); got != tc.want {
			t.Errorf("CauseError(%+v) = %q, want %q", tc.cause, got, tc.want)
		}
	}
}
