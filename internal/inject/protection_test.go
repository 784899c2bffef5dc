package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

const managerUser = "system:serviceaccount:deckhand-system:deckhand-controller-manager"

// admitAs is admit with the request's userInfo.username set to user (a
// dry run when the name ends in "(dry run)").
func admitAs(t *testing.T, l *sidecarcontrol.Lister, user string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	req := podRequest(t, "prod", p)
	if u, ok := strings.CutSuffix(user, " (dry run)"); ok {
		user, req.DryRun = u, ptr.To(true)
	}
	req.UserInfo.Username = user
	resp := (&Handler{Lister: l}).Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("not allowed: %+v", resp.Result)
	}
	if len(resp.Patch) == 0 {
		return p.DeepCopy()
	}
	patch, err := jsonpatchapply.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("applying %s: %v", resp.Patch, err)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// Who may skip which SidecarSet with the skip-injection annotation.
func TestSkipInjectionAnnotation(t *testing.T) {
	web := map[string]string{"app": "web"}
	skip := map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
	mandatory := set("mandatory", nil)
	optional := set("optional", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.AllowOptOut = true })
	cases := map[string]struct {
		user        string
		annotations map[string]string
		want        []string
	}{
		"a tenant's pod without the annotation":      {"alice", nil, []string{"mandatory-c", "optional-c", "app"}},
		"a tenant's pod with the annotation":         {"alice", skip, []string{"mandatory-c", "app"}},
		"Deckhand's own dry run with the annotation": {managerUser + " (dry run)", skip, []string{"app"}},
		"Deckhand's own dry run without it":          {managerUser + " (dry run)", nil, []string{"mandatory-c", "optional-c", "app"}},
		// A PodSet's pod, from a tenant's template.
		"Deckhand's own pod with the annotation": {managerUser, skip, []string{"mandatory-c", "app"}},
		"a tenant's dry run with the annotation": {"alice (dry run)", skip, []string{"mandatory-c", "app"}},
		"an unauthenticated request":             {"", skip, []string{"mandatory-c", "app"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := testListerWith(t, sidecarcontrol.Options{ManagerUser: managerUser}, nil, mandatory.DeepCopy(), optional.DeepCopy())
			p := pod(web, "app")
			p.Annotations = tc.annotations
			got := admitAs(t, l, tc.user, p)
			if fmt.Sprint(cnames(got.Spec.Containers)) != fmt.Sprint(tc.want) {
				t.Errorf("containers %v, want %v", cnames(got.Spec.Containers), tc.want)
			}
		})
	}
	// A manager that does not know its own user trusts no one.
	l := testLister(t, nil, mandatory.DeepCopy())
	p := pod(web, "app")
	p.Annotations = skip
	if got := admitAs(t, l, "", p); len(got.Spec.Containers) != 2 {
		t.Errorf("with no manager user known, a pod skipped a mandatory SidecarSet: %v", cnames(got.Spec.Containers))
	}
}

// A record a new pod brings is dropped, but for the entries of the
// SidecarSets the API server injects by policy in the same admission.
func TestRecordOnCreateIsDeckhands(t *testing.T) {
	web := map[string]string{"app": "web"}
	s := set("guard", nil)
	byPolicy := set("policy", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection })
	forge := func(names ...string) map[string]string {
		var r sidecarcontrol.PodRecord
		for _, n := range names {
			r.Set(n, "f00d", "beef", []string{n + "-c"})
		}
		names2, hash, wi := r.Values()
		return map[string]string{
			deckhandv1alpha1.SidecarSetInjectedAnnotation:         names2,
			deckhandv1alpha1.SidecarSetHashAnnotation:             hash,
			deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation: wi,
			"example.com/other":                                   "kept",
		}
	}
	cases := map[string]struct {
		annotations  map[string]string
		containers   []string
		want         []string
		wantRecorded []string
	}{
		"own container passed for the sidecar":                {forge("guard"), []string{"app", "guard-c"}, []string{"app", "guard-c"}, nil},
		"record only":                                         {forge("guard"), []string{"app"}, []string{"guard-c", "app"}, []string{"guard"}},
		"record of a SidecarSet that does not select the pod": {forge("elsewhere"), []string{"app"}, []string{"guard-c", "app"}, []string{"guard"}},
		"a policy's entry is kept":                            {forge("guard", "policy"), []string{"policy-c", "app", "guard-c"}, []string{"policy-c", "app", "guard-c"}, []string{"policy"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := testListerWith(t, sidecarcontrol.Options{Modes: sidecarcontrol.Modes{PolicyServed: true}}, nil, s.DeepCopy(), byPolicy.DeepCopy())
			p := pod(web, tc.containers...)
			p.Annotations = tc.annotations
			got := admitAs(t, l, "alice", p)
			if fmt.Sprint(cnames(got.Spec.Containers)) != fmt.Sprint(tc.want) {
				t.Errorf("containers %v, want %v", cnames(got.Spec.Containers), tc.want)
			}
			if rec := sidecarcontrol.ReadPodRecord(got.Annotations).Names(); fmt.Sprint(rec) != fmt.Sprint(tc.wantRecorded) {
				t.Errorf("recorded %v, want %v (annotations %v)", rec, tc.wantRecorded, got.Annotations)
			}
			if tc.wantRecorded == nil {
				if _, ok := got.Annotations[deckhandv1alpha1.SidecarSetHashAnnotation]; ok {
					t.Errorf("an empty record was left on the pod: %v", got.Annotations)
				}
			}
			if got.Annotations["example.com/other"] != "kept" {
				t.Errorf("an annotation that is not the record was changed: %v", got.Annotations)
			}
		})
	}
}

// What a sidecar sharing the app's volumes mounts.
func TestSharedMounts(t *testing.T) {
	web := map[string]string{"app": "web"}
	mk := func(writable bool) *deckhandv1alpha1.SidecarSet {
		return set("reader", func(s *deckhandv1alpha1.SidecarSet) {
			c := &s.Spec.Containers[0]
			c.VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/etc/reader"}}
			c.Env = []corev1.EnvVar{{Name: "MINE", Value: "sidecar"}}
			c.ShareVolumePolicy = deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled, Writable: writable}
		})
	}
	p := pod(web, "app", "other")
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD", Value: "p"}, {Name: "MINE", Value: "app"}, {Name: "UNUSED", Value: "u"}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data/"},
		{Name: "evil", MountPath: "/etc/reader/"},
		{Name: "evil", MountPath: "/etc/./reader/bin", SubPath: "bin"},
		{Name: "logs", MountPath: "/logs", SubPathExpr: "$(POD)/$(MINE)"},
		{Name: "root", MountPath: "/etc"}, // above the sidecar's own: shared
	}
	p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "POD", Value: "other"}}
	p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{
		{Name: "data2", MountPath: "/data"}, // the same path as app's /data/: the first wins
		{Name: "cache", MountPath: "/cache", ReadOnly: true},
	}
	for _, writable := range []bool{false, true} {
		t.Run(fmt.Sprintf("writable=%v", writable), func(t *testing.T) {
			l := testLister(t, nil, mk(writable))
			got := admitAs(t, l, "alice", p.DeepCopy())
			r := got.Spec.Containers[0]
			var mounts []string
			for _, m := range r.VolumeMounts {
				mounts = append(mounts, fmt.Sprintf("%s:%s:%v", m.Name, m.MountPath, m.ReadOnly))
			}
			ro := !writable
			want := []string{"own:/etc/reader:false", fmt.Sprintf("data:/data/:%v", ro), fmt.Sprintf("logs:/logs:%v", ro), fmt.Sprintf("root:/etc:%v", ro), "cache:/cache:true"}
			if fmt.Sprint(mounts) != fmt.Sprint(want) {
				t.Errorf("mounts %v, want %v", mounts, want)
			}
			var env []string
			for _, e := range r.Env {
				env = append(env, e.Name+"="+e.Value)
			}
			// POD comes from the container the mount is from; MINE is the
			// sidecar's own.
			if want := []string{"MINE=sidecar", "POD=p"}; fmt.Sprint(env) != fmt.Sprint(want) {
				t.Errorf("env %v, want %v", env, want)
			}
		})
	}
}
