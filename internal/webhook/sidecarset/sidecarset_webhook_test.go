package sidecarset_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestValidation creates invalid SidecarSets against the real API server
// (CRD schema, CEL rules, the validating webhook and its dry-run pod) and
// checks that each is rejected with a message naming the field.
func TestValidation(t *testing.T) {
	ns := env.Namespace(t)
	valid := func(mut func(s *deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
		s := newSidecarSet("", ns, "web", sidecar("proxy", "proxy:1"))
		mut(s)
		return s
	}
	cases := []struct {
		name  string
		set   *deckhandv1alpha1.SidecarSet
		field string // must appear in the error message
		words string // and so must this
	}{
		{"selector missing", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Selector = nil }), "spec.selector", ""},
		{"selector empty", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} }), "spec.selector", "must not be empty"},
		{"selector operator", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}
		}), "spec.selector.matchExpressions[0].operator", ""},
		{"selector label value", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Selector.MatchLabels["app"] = "not a value!" }), "spec.selector.matchLabels", ""},
		{"namespace", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Namespace = "Not_A_Namespace" }), "spec.namespace", ""},
		{"namespaceSelector", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}
		}), "spec.namespaceSelector.matchExpressions[0].values", ""},
		{"no containers", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers = nil }), "spec.containers", "at least one container"},
		{"duplicate container names", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sidecar("proxy", "init:1")}
		}), "spec.containers[0].name", "Duplicate"},
		{"container name", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "Proxy_1" }), "spec.containers[0].name", ""},
		{"image missing", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" }), "spec.containers[0].image", "Required"},
		{"image whitespace", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = " proxy:1" }), "spec.containers[0].image", ""},
		{"requests above limits", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1")},
			}
		}), "spec.containers[0].resources.requests[cpu]", "limit"},
		{"podInjectPolicy enum", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].PodInjectPolicy = "Middle" }), "spec.containers[0].podInjectPolicy", "Unsupported value"},
		{"injectionMode enum", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = "Telepathy" }), "spec.injectionMode", "Unsupported value"},
		{"shareVolumePolicy enum", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].ShareVolumePolicy.Type = "sometimes" }), "spec.containers[0].shareVolumePolicy.type", "Unsupported value"},
		{"transferEnv envName", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app"}}
		}), "spec.containers[0].transferEnv[0].envName", ""},
		{"restartPolicy on a container", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}), "spec.containers[0].restartPolicy", ""},
		{"duplicate volume names", valid(func(s *deckhandv1alpha1.SidecarSet) {
			v := corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
			s.Spec.Volumes = []corev1.Volume{v, v}
		}), "spec.volumes[1].name", "Duplicate"},
		{"updateStrategy type", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Type = "Recreate" }), "spec.updateStrategy.type", "Unsupported value"},
		{"maxUnavailable zero", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}), "spec.updateStrategy.maxUnavailable", "at least 1"},
		{"maxUnavailable percent", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("150%"))
		}), "spec.updateStrategy.maxUnavailable", "100%"},
		{"partition garbage", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("half"))
		}), "spec.updateStrategy.partition", ""},
		{"partition negative", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(-1)) }), "spec.updateStrategy.partition", ""},
		{"onFailure enum", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.OnFailure = "Retry" }), "spec.updateStrategy.onFailure", "Unsupported value"},
		{"progressDeadlineSeconds zero", valid(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](0) }), "spec.updateStrategy.progressDeadlineSeconds", ""},
		{"partition and selector", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(1))
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}), "spec.updateStrategy", "mutually exclusive"},
		{"recreate unknown", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Recreate = "Delete"
		}), "spec.updateStrategy.recreate", ""},
		{"recreate Evict under NotUpdate", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = deckhandv1alpha1.NotUpdateSidecarSetStrategy
			s.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
		}), "spec.updateStrategy.recreate", "NotUpdate"},
		// Judged by the API server's own pod validation through the dry-run pod.
		{"container port (dry run)", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}}
		}), "spec.containers[0].ports[0].containerPort", ""},
		{"duplicate mount path (dry run)", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "a", MountPath: "/x"}, {Name: "b", MountPath: "/x"}}
		}), "spec.containers[0].volumeMounts[1]", "Duplicate"},
		{"probe on a regular init container (dry run)", valid(func(s *deckhandv1alpha1.SidecarSet) {
			c := sidecar("init", "init:1")
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{c}
		}), "spec.initContainers[0].readinessProbe", ""},
		{"probe without handler (dry run)", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
		}), "spec.containers[0].readinessProbe", ""},
		{"volume source (dry run)", valid(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: ""}}}}
		}), "spec.volumes[0].hostPath.path", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.set.Name = "invalid-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			tc.set.Name = strings.NewReplacer("(", "", ")", "").Replace(tc.set.Name)
			err := env.Client.Create(ctxT(t), tc.set)
			if err == nil {
				_ = env.Client.Delete(ctxT(t), tc.set)
				t.Fatalf("created an invalid SidecarSet (%s)", tc.name)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error is not Invalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error does not name %q (with %q): %v", tc.field, tc.words, err)
			}
		})
	}

	// The valid base is accepted (so the cases above fail for their own reason).
	ok := valid(func(s *deckhandv1alpha1.SidecarSet) { s.Name = "valid-" + ns })
	createSidecarSet(t, ok)
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestValidationConflictingContainerNames checks the cross-SidecarSet rule:
// two SidecarSets that can select the same pod may not inject containers of
// the same name.
func TestValidationConflictingContainerNames(t *testing.T) {
	nsA := env.Namespace(t)
	nsB := env.Namespace(t)
	first := newSidecarSet("conflict-a-"+nsA, nsA, "web", sidecar("logger", "logger:1"))
	createSidecarSet(t, first)

	// Same namespace, a selector that can match the same pods (app=web, tier=front).
	clash := newSidecarSet("conflict-b-"+nsA, nsA, "web", sidecar("proxy", "proxy:1"), sidecar("logger", "logger:2"))
	clash.Spec.Selector.MatchLabels["tier"] = "front"
	err := env.Client.Create(ctxT(t), clash)
	if err == nil {
		_ = env.Client.Delete(ctxT(t), clash)
		t.Fatal("created a SidecarSet whose container name clashes with an overlapping SidecarSet")
	}
	if !strings.Contains(err.Error(), "spec.containers[1].name") || !strings.Contains(err.Error(), first.Name) {
		t.Errorf("error does not name the field and the other SidecarSet: %v", err)
	}

	// An all-namespaces SidecarSet with a namespaceSelector overlaps too.
	wide := newSidecarSet("conflict-c-"+nsA, "", "web", sidecar("logger", "logger:3"))
	wide.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
	if err := env.Client.Create(ctxT(t), wide); err == nil || !strings.Contains(err.Error(), "spec.containers[0].name") {
		_ = env.Client.Delete(ctxT(t), wide)
		t.Errorf("all-namespaces SidecarSet with a clashing container name: err = %v", err)
	}

	// Disjoint: another namespace, or a selector that cannot match the same pod.
	otherNS := newSidecarSet("conflict-d-"+nsA, nsB, "web", sidecar("logger", "logger:4"))
	createSidecarSet(t, otherNS)
	otherApp := newSidecarSet("conflict-e-"+nsA, nsA, "db", sidecar("logger", "logger:5"))
	createSidecarSet(t, otherApp)
	excluded := newSidecarSet("conflict-f-"+nsA, nsA, "web", sidecar("logger", "logger:6"))
	excluded.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web", "db"}},
	}}
	createSidecarSet(t, excluded)

	// Updating a SidecarSet into a clash is rejected as well.
	err = tryUpdateSidecarSet(t, otherApp.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Selector.MatchLabels["app"] = "web" })
	if err == nil || !strings.Contains(err.Error(), "spec.containers[0].name") {
		t.Errorf("update into a clash: err = %v", err)
	}
}

// TestVolumeConflict checks the cross-SidecarSet volume rule: a SidecarSet
// that can select the same pods as another may not define a volume of the
// same name differently. The same volume (after defaulting) is accepted,
// and both SidecarSets then inject into one pod with the volume once.
func TestVolumeConflict(t *testing.T) {
	ns := env.Namespace(t)
	configMap := func(name string, mode *int32) corev1.Volume {
		return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, DefaultMode: mode},
		}}
	}
	logs := corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}

	first := newSidecarSet("vol-a-"+ns, ns, "web", sidecar("logger", "logger:1"))
	first.Spec.Volumes = []corev1.Volume{logs, configMap("settings", nil)}
	createSidecarSet(t, first)

	// Same pods, "config" names another ConfigMap.
	clash := newSidecarSet("vol-b-"+ns, ns, "web", sidecar("proxy", "proxy:1"))
	clash.Spec.Selector.MatchLabels["tier"] = "front"
	clash.Spec.Volumes = []corev1.Volume{logs, configMap("other-settings", nil)}
	err := env.Client.Create(ctxT(t), clash)
	if err == nil {
		_ = env.Client.Delete(ctxT(t), clash)
		t.Fatal("created a SidecarSet whose volume \"config\" differs from an overlapping SidecarSet's")
	}
	msg := err.Error()
	if !strings.Contains(msg, "spec.volumes[1].name") || !strings.Contains(msg, first.Name) || !strings.Contains(msg, "different volume") {
		t.Errorf("error does not name the field, the other SidecarSet and the reason: %v", err)
	}
	if strings.Contains(msg, "spec.volumes[0]") {
		t.Errorf("the identical volume \"logs\" was reported as a conflict: %v", err)
	}

	// The same volumes, one spelling out the default mode the webhook fills
	// in anyway: compatible.
	compatible := newSidecarSet("vol-c-"+ns, ns, "web", sidecar("proxy", "proxy:1"))
	compatible.Spec.Volumes = []corev1.Volume{configMap("settings", ptr.To[int32](0o644)), logs}
	createSidecarSet(t, compatible)

	// A different volume of the same name is fine where no pod can match both.
	elsewhere := newSidecarSet("vol-d-"+ns, ns, "db", sidecar("proxy", "proxy:1"))
	elsewhere.Spec.Volumes = []corev1.Volume{configMap("other-settings", nil)}
	createSidecarSet(t, elsewhere)

	// Updating a compatible SidecarSet into a conflict is refused too.
	err = tryUpdateSidecarSet(t, compatible.Name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Volumes[0] = configMap("changed-settings", nil)
	})
	if err == nil || !strings.Contains(err.Error(), "spec.volumes[0].name") {
		t.Errorf("update into a volume conflict: err = %v", err)
	}

	// Both compatible SidecarSets inject into a pod, each volume once.
	p := createPod(t, newPod(ns, "web-0", map[string]string{"app": "web"}, "app"))
	if podutil.FindContainer(p.Spec.Containers, "logger") == nil || podutil.FindContainer(p.Spec.Containers, "proxy") == nil {
		t.Fatalf("pod containers %v, want logger and proxy injected", names(p.Spec.Containers))
	}
	count := map[string]int{}
	for _, v := range p.Spec.Volumes {
		count[v.Name]++
		if v.Name == "config" && (v.ConfigMap == nil || v.ConfigMap.Name != "settings") {
			t.Errorf("pod volume config = %+v, want ConfigMap settings", v.VolumeSource)
		}
	}
	if count["config"] != 1 || count["logs"] != 1 {
		t.Errorf("pod volumes %v, want config and logs once each", count)
	}
}
