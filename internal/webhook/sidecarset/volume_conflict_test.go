package sidecarset_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

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
