package sidecarset_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestTransferEnvNamesSourceFromAndSharedDevices: on the real API server,
// transferEnv copies several variables (envNames) from a container the pod
// names in a label (sourceContainerNameFrom), and shareVolumeDevicePolicy
// gives the sidecar the app container's raw block device.
func TestTransferEnvNamesSourceFromAndSharedDevices(t *testing.T) {
	ns := env.Namespace(t)
	agent := sidecar("agent", "agent:1")
	agent.Env = []corev1.EnvVar{{Name: "REGION", Value: "sidecar-default"}}
	agent.TransferEnv = []deckhandv1alpha1.TransferEnvVar{
		{SourceContainerNameFrom: &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['example.com/main']"}},
			EnvNames: []string{"REGION", "ZONE", "ABSENT"}},
		{SourceContainerName: "helper", EnvName: "HELPER_MODE"},
	}
	agent.ShareVolumeDevicePolicy = &deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled}
	createSidecarSet(t, newSidecarSet("transfer-"+ns, ns, "transfer", agent))

	p := newPod(ns, "web", map[string]string{"app": "transfer", "example.com/main": "server"}, "helper", "server")
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HELPER_MODE", Value: "fast"}, {Name: "ZONE", Value: "helper-zone"}}
	p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "ZONE", Value: "a"}, {Name: "REGION", Value: "eu"}}
	p.Spec.Containers[1].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	// REGION is the sidecar's own: it keeps its value.
	c := agentWithEnv(t, createPod(t, p), "REGION=sidecar-default,ZONE=a,HELPER_MODE=fast")
	if len(c.VolumeDevices) != 1 || c.VolumeDevices[0].DevicePath != "/dev/xvda" || c.VolumeDevices[0].Name != "data" {
		t.Errorf("agent volumeDevices %+v, want the server's /dev/xvda", c.VolumeDevices)
	}

	// A pod without the label transfers nothing from it.
	q := newPod(ns, "plain", map[string]string{"app": "transfer"}, "server")
	q.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "REGION", Value: "us"}}
	agentWithEnv(t, createPod(t, q), "REGION=sidecar-default")
}

// TestTransferEnvKeepsTheSidecarsOwnEnv: on the real API server, a pod
// admitted through the webhook gets, in a sidecar that defines OD_NAME
// itself and also transfers OD_NAME from the app container, the sidecar's
// own value (as OpenKruise's e2e suite asserts); a variable the sidecar
// does not define is transferred after the sidecar's own.
func TestTransferEnvKeepsTheSidecarsOwnEnv(t *testing.T) {
	ns := env.Namespace(t)
	agent := sidecar("agent", "agent:1")
	agent.Env = []corev1.EnvVar{{Name: "OD_NAME", Value: "sidecar"}, {Name: "LEVEL", Value: "info"}}
	agent.TransferEnv = []deckhandv1alpha1.TransferEnvVar{
		{SourceContainerName: "main", EnvName: "OD_NAME"},
		{SourceContainerName: "main", EnvName: "OD_ZONE"},
	}
	createSidecarSet(t, newSidecarSet("own-env-"+ns, ns, "own-env", agent))

	p := newPod(ns, "web", map[string]string{"app": "own-env"}, "main")
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OD_NAME", Value: "app"}, {Name: "OD_ZONE", Value: "z1"}}
	got := createPod(t, p)
	agentWithEnv(t, got, "OD_NAME=sidecar,LEVEL=info,OD_ZONE=z1")
	if app := podutil.FindContainer(got.Spec.Containers, "main"); app == nil || len(app.Env) != 2 || app.Env[0].Value != "app" {
		t.Errorf("the app container changed: %+v", app)
	}
}

// agentWithEnv checks that p has an agent sidecar whose env, as
// NAME=value in order joined by commas, is want, and returns the sidecar.
func agentWithEnv(t *testing.T, p *corev1.Pod, want string) *corev1.Container {
	t.Helper()
	c := podutil.FindContainer(p.Spec.Containers, "agent")
	if c == nil {
		t.Fatalf("no agent sidecar: %v", names(p.Spec.Containers))
	}
	envs := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		envs = append(envs, e.Name+"="+e.Value)
	}
	if got := strings.Join(envs, ","); got != want {
		t.Errorf("agent env %s, want %s", got, want)
	}
	return c
}

// TestTransferEnvValidation: transferEnv needs exactly one source and
// exactly one of envName and envNames, a supported fieldRef, and Policy mode
// refuses the fields its compiled policy does not inject; each refusal
// names the field.
func TestTransferEnvValidation(t *testing.T) {
	ns := env.Namespace(t)
	from := func(fp string) *deckhandv1alpha1.SourceContainerNameSource {
		return &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fp}}
	}
	cases := []struct {
		name     string
		transfer deckhandv1alpha1.TransferEnvVar
		devices  deckhandv1alpha1.ShareVolumePolicyType
		mode     deckhandv1alpha1.InjectionMode
		field    string
		words    string
	}{
		{"no source", deckhandv1alpha1.TransferEnvVar{EnvName: "A"}, "", "", "spec.containers[0].transferEnv[0].sourceContainerName", "Required"},
		{"two sources", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", SourceContainerNameFrom: from("metadata.labels['a']"), EnvName: "A"}, "", "",
			"spec.containers[0].transferEnv[0].sourceContainerNameFrom", "sourceContainerName"},
		{"no env", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app"}, "", "", "spec.containers[0].transferEnv[0].envName", "Required"},
		{"envName and envNames", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvName: "A", EnvNames: []string{"B"}}, "", "",
			"spec.containers[0].transferEnv[0].envNames", "envName"},
		{"empty envNames entry", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvNames: []string{"B", ""}}, "", "",
			"spec.containers[0].transferEnv[0].envNames[1]", "Required"},
		{"unsupported fieldPath", deckhandv1alpha1.TransferEnvVar{SourceContainerNameFrom: from("spec.nodeName"), EnvName: "A"}, "", "",
			"spec.containers[0].transferEnv[0].sourceContainerNameFrom.fieldRef.fieldPath", "metadata.labels"},
		{"shareVolumeDevicePolicy enum", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvName: "A"}, "sometimes", "",
			"spec.containers[0].shareVolumeDevicePolicy.type", "Unsupported value"},
		{"Policy mode envNames", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvNames: []string{"A"}}, "", deckhandv1alpha1.PolicyInjection,
			"spec.containers[0].transferEnv[0].envNames", "spec.injectionMode: Policy does not support"},
		{"Policy mode sourceContainerNameFrom", deckhandv1alpha1.TransferEnvVar{SourceContainerNameFrom: from("metadata.annotations['a']"), EnvName: "A"}, "", deckhandv1alpha1.PolicyInjection,
			"spec.containers[0].transferEnv[0].sourceContainerNameFrom", "spec.injectionMode: Policy does not support"},
		{"Policy mode shareVolumeDevicePolicy", deckhandv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvName: "A"}, deckhandv1alpha1.ShareVolumePolicyEnabled, deckhandv1alpha1.PolicyInjection,
			"spec.containers[0].shareVolumeDevicePolicy", "spec.injectionMode: Policy does not support"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sidecar("proxy", "proxy:1")
			c.TransferEnv = []deckhandv1alpha1.TransferEnvVar{tc.transfer}
			if tc.devices != "" {
				c.ShareVolumeDevicePolicy = &deckhandv1alpha1.ShareVolumePolicy{Type: tc.devices}
			}
			s := newSidecarSet("bad-transfer-"+ns+"-"+string(rune('a'+i)), ns, "web", c)
			s.Spec.InjectionMode = tc.mode
			wantRefused(t, s, tc.field, tc.words)
		})
	}
}
