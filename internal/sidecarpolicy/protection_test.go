package sidecarpolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Which pods a policy leaves out by the skip-injection annotation: any,
// when the SidecarSet allows opting out; else only the manager's own.
func TestSkipCondition(t *testing.T) {
	const user = "system:serviceaccount:deckhand-system:deckhand-controller-manager"
	annotated := `object.metadata.annotations["apps.deckhand.dev/sidecarset-skip-injection"] == 'true'`
	cases := map[string]struct {
		allowOptOut bool
		user        string
		want        string
	}{
		"opting out allowed":  {true, user, annotated},
		"mandatory":           {false, user, `== 'true' && request.dryRun && request.userInfo.username == "` + user + `"`},
		"mandatory, no user":  {false, "", "false"},
		"opting out, no user": {true, "", annotated},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := scs("log", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.AllowOptOut = tc.allowOptOut })
			c := newCompiler(s, nil)
			c.managerUser = tc.user
			got := c.skippedCondition()
			if !strings.Contains(got, tc.want) {
				t.Errorf("skip condition %s, want it to contain %s", got, tc.want)
			}
			if !tc.allowOptOut && got != "false" && !strings.HasSuffix(got, `request.dryRun && request.userInfo.username == "`+user+`"`) {
				t.Errorf("a mandatory SidecarSet's policy skips any annotated pod: %s", got)
			}
		})
	}
}

// A shared mount is readOnly in the compiled mounts unless writable, and
// the sidecar's own paths are compared cleaned.
func TestSharedMountsCEL(t *testing.T) {
	sc := &deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "r", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: "/etc/reader/"}}},
		ShareVolumePolicy: deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled}}
	got := sharedMounts(sc)
	for _, want := range []string{`"readOnly": dyn(true)`, `!= "/etc/reader"`, `.startsWith("/etc/reader/")`, "subPathExpr == ''"} {
		if !strings.Contains(got, want) {
			t.Errorf("shared mounts %s lack %s", got, want)
		}
	}
	sc.ShareVolumePolicy.Writable = true
	if got := sharedMounts(sc); strings.Contains(got, "readOnly") {
		t.Errorf("writable shared mounts are made readOnly: %s", got)
	}
}
