package sidecarset_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func TestInjectionOrderAndInitContainers(t *testing.T) {
	ns := env.Namespace(t)
	before := sidecar("before", "proxy:1")
	after := sidecar("after", "logger:1")
	after.PodInjectPolicy = deckhandv1alpha1.AfterAppContainer
	initBefore := sidecar("init-before", "setup:1")
	native := sidecar("native", "mesh:1")
	native.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	initAfter := sidecar("init-after", "late:1")
	initAfter.PodInjectPolicy = deckhandv1alpha1.AfterAppContainer

	s := newSidecarSet("order-"+ns, ns, "web", after, before)
	s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{initBefore, native, initAfter}
	s = createSidecarSet(t, s)

	p := newPod(ns, "web-0", map[string]string{"app": "web"}, "app1", "app2")
	p.Spec.InitContainers = []corev1.Container{{Name: "app-init", Image: "app:1"}}
	p = createPod(t, p)

	if got, want := names(p.Spec.Containers), []string{"before", "app1", "app2", "after"}; !reflect.DeepEqual(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if got, want := names(p.Spec.InitContainers), []string{"init-before", "native", "app-init", "init-after"}; !reflect.DeepEqual(got, want) {
		t.Errorf("init containers = %v, want %v", got, want)
	}
	if c := podutil.FindContainer(p.Spec.InitContainers, "native"); c == nil || c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the native sidecar lost restartPolicy: Always: %+v", c)
	}
	// The SidecarSet defaulter gave the containers the API server's defaults.
	if c := podutil.FindContainer(p.Spec.Containers, "before"); c.ImagePullPolicy != corev1.PullIfNotPresent || c.TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("sidecar defaults missing: %+v", c)
	}

	// The annotations record the SidecarSet and both revision hashes.
	stored := testutil.Get(ctxT(t), t, env.Client, types.NamespacedName{Name: s.Name}, &deckhandv1alpha1.SidecarSet{})
	hash, withoutImage := sidecarcontrol.Hashes(&stored.Spec)
	if got := p.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation]; got != s.Name {
		t.Errorf("injected annotation = %q, want %q", got, s.Name)
	}
	rec := sidecarcontrol.ReadPodRecord(p.Annotations)
	if gotHash, gotWithoutImage := rec.Revisions(s.Name); gotHash != hash || gotWithoutImage != withoutImage {
		t.Errorf("hash annotations = %s / %s, want %s / %s", gotHash, gotWithoutImage, hash, withoutImage)
	}
	if got, want := rec.Containers(s.Name), []string{"init-before", "native", "init-after", "after", "before"}; !reflect.DeepEqual(got, want) {
		t.Errorf("recorded containers = %v, want %v", got, want)
	}

	// A pod the selector does not match is left alone.
	other := createPod(t, newPod(ns, "db-0", map[string]string{"app": "db"}, "db"))
	if got := names(other.Spec.Containers); !reflect.DeepEqual(got, []string{"db"}) || other.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation] != "" {
		t.Errorf("unmatched pod was changed: %v %v", got, other.Annotations)
	}
}

func TestInjectionVolumesSecretsSharedMountsAndTransferEnv(t *testing.T) {
	ns := env.Namespace(t)
	logger := sidecar("logger", "fluent-bit:3")
	logger.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "KEEP", Value: "me"}}
	logger.VolumeMounts = []corev1.VolumeMount{{Name: "buffer", MountPath: "/buffer"}}
	logger.ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyEnabled
	logger.TransferEnv = []deckhandv1alpha1.TransferEnvVar{
		{SourceContainerName: "app", EnvName: "LOG_LEVEL"},
		{SourceContainerName: "app", EnvName: "POD_IP"},
		{SourceContainerName: "app", EnvName: "MISSING"},
		{SourceContainerName: "nope", EnvName: "LOG_LEVEL"},
	}
	s := newSidecarSet("volumes-"+ns, ns, "web", logger)
	s.Spec.Volumes = []corev1.Volume{
		{Name: "buffer", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sidecar-config"}}}},
	}
	s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "shared"}, {Name: "sidecar-registry"}}
	createSidecarSet(t, s)

	p := newPod(ns, "web-0", map[string]string{"app": "web"}, "app")
	p.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "LOG_LEVEL", Value: "debug"},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/app"}, {Name: "config", MountPath: "/etc/app"}}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "shared"}}
	p = createPod(t, p)

	var vols []string
	for _, v := range p.Spec.Volumes {
		vols = append(vols, v.Name)
		if v.Name == "config" && (v.EmptyDir == nil || v.ConfigMap != nil) {
			t.Errorf("the pod's own volume %q should win over the SidecarSet's: %+v", v.Name, v.VolumeSource)
		}
	}
	// The API server appends the service account token volume after admission plugins.
	if len(vols) < 3 || !reflect.DeepEqual(vols[:3], []string{"logs", "config", "buffer"}) {
		t.Errorf("volumes = %v, want logs, config, buffer first", vols)
	}
	if got, want := p.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "shared"}, {Name: "sidecar-registry"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("imagePullSecrets = %v, want %v", got, want)
	}
	c := podutil.FindContainer(p.Spec.Containers, "logger")
	if c == nil {
		t.Fatalf("logger not injected: %v", names(p.Spec.Containers))
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for path, vol := range map[string]string{"/buffer": "buffer", "/var/log/app": "logs", "/etc/app": "config"} {
		if mounts[path] != vol {
			t.Errorf("sidecar mount %s = %q, want %q (mounts %v)", path, mounts[path], vol, mounts)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	// The sidecar defines LOG_LEVEL itself: its own value wins over the
	// transferred one, as in OpenKruise.
	if env["LOG_LEVEL"].Value != "info" {
		t.Errorf("LOG_LEVEL = %q, want the sidecar's own value %q", env["LOG_LEVEL"].Value, "info")
	}
	if ip := env["POD_IP"]; ip.ValueFrom == nil || ip.ValueFrom.FieldRef == nil || ip.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP not transferred with its valueFrom: %+v", ip)
	}
	if env["KEEP"].Value != "me" || len(c.Env) != 3 {
		t.Errorf("sidecar env = %+v, want LOG_LEVEL, KEEP, POD_IP", c.Env)
	}
}

func TestInjectionNamespaceAndNamespaceSelector(t *testing.T) {
	nsA := env.Namespace(t)
	nsB := env.Namespace(t)
	createSidecarSet(t, newSidecarSet("ns-"+nsA, nsA, "web", sidecar("ns-scoped", "proxy:1")))

	// A namespaceSelector on a label unique to this test.
	team := "team-" + nsA
	sel := newSidecarSet("nssel-"+nsA, "", "web-"+nsA, sidecar("team-sidecar", "proxy:1"))
	sel.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": team}}
	createSidecarSet(t, sel)
	labelNamespace(t, nsB, "team", team)

	if p := createPod(t, newPod(nsA, "a", map[string]string{"app": "web"}, "app")); podutil.FindContainer(p.Spec.Containers, "ns-scoped") == nil {
		t.Errorf("pod in %s not injected: %v", nsA, names(p.Spec.Containers))
	}
	if p := createPod(t, newPod(nsB, "b", map[string]string{"app": "web"}, "app")); podutil.FindContainer(p.Spec.Containers, "ns-scoped") != nil {
		t.Errorf("pod in %s injected by a SidecarSet limited to %s", nsB, nsA)
	}
	// Deployment-style: no namespace in the object; the request's namespace counts.
	if p := createPod(t, newPod(nsB, "c", map[string]string{"app": "web-" + nsA}, "app")); podutil.FindContainer(p.Spec.Containers, "team-sidecar") == nil {
		t.Errorf("pod in namespace labelled team=%s not injected: %v", team, names(p.Spec.Containers))
	}
	if p := createPod(t, newPod(nsA, "d", map[string]string{"app": "web-" + nsA}, "app")); podutil.FindContainer(p.Spec.Containers, "team-sidecar") != nil {
		t.Errorf("pod in a namespace without the team label was injected")
	}
}

// labelNamespace labels ns and waits until the manager's metadata cache
// (which the pod webhook reads namespace labels from) shows it.
func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	obj := testutil.Get(ctxT(t), t, env.Client, types.NamespacedName{Name: ns}, &corev1.Namespace{})
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[key] = value
	if err := env.Client.Update(ctxT(t), obj); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
			return false, err
		}
		return m.Labels[key] == value, nil
	}, "the cache shows namespace %s labelled %s=%s", ns, key, value)
}

func TestInjectionPaused(t *testing.T) {
	ns := env.Namespace(t)
	s := newSidecarSet("paused-"+ns, ns, "web", sidecar("paused-sidecar", "proxy:1"))
	s.Spec.InjectionStrategy.Paused = true
	createSidecarSet(t, s)
	if p := createPod(t, newPod(ns, "a", map[string]string{"app": "web"}, "app")); len(p.Spec.Containers) != 1 {
		t.Errorf("paused SidecarSet injected: %v", names(p.Spec.Containers))
	}
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = false })
	if p := createPod(t, newPod(ns, "b", map[string]string{"app": "web"}, "app")); podutil.FindContainer(p.Spec.Containers, "paused-sidecar") == nil {
		t.Errorf("unpaused SidecarSet did not inject: %v", names(p.Spec.Containers))
	}
}

func TestTwoSidecarSetsOnOnePodAndIdempotency(t *testing.T) {
	ns := env.Namespace(t)
	// Created in reverse name order: injection order follows names, not creation.
	b := newSidecarSet("b-"+ns, ns, "web", sidecar("b-sidecar", "b:1"))
	a := newSidecarSet("a-"+ns, ns, "web", sidecar("a-sidecar", "a:1"))
	createSidecarSet(t, b)
	createSidecarSet(t, a)

	p := createPod(t, newPod(ns, "web-0", map[string]string{"app": "web"}, "app"))
	if got, want := names(p.Spec.Containers), []string{"a-sidecar", "b-sidecar", "app"}; !reflect.DeepEqual(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if got, want := p.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation], a.Name+","+b.Name; got != want {
		t.Errorf("injected annotation = %q, want %q", got, want)
	}

	// A pod created from an injected pod's spec (as a copy-paste or a
	// controller that templates from a live pod would) is not given second
	// copies, and the record it came with is dropped: a new pod's record is
	// Deckhand's to write, and its containers are the pod's own.
	clone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: p.Labels, Annotations: p.Annotations}}
	for _, c := range p.Spec.Containers {
		clone.Spec.Containers = append(clone.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	clone = createPod(t, clone)
	if got, want := names(clone.Spec.Containers), []string{"a-sidecar", "b-sidecar", "app"}; !reflect.DeepEqual(got, want) {
		t.Errorf("re-admitted pod containers = %v, want %v", got, want)
	}
	if names := sidecarcontrol.ReadPodRecord(clone.Annotations).Names(); len(names) != 0 {
		t.Errorf("the record the re-admitted pod came with was kept: %v", clone.Annotations)
	}

	// A pod that has its own container of a sidecar's name keeps it.
	own := newPod(ns, "web-2", map[string]string{"app": "web"}, "app", "a-sidecar")
	own.Spec.Containers[1].Image = "mine:7"
	own = createPod(t, own)
	if got, want := names(own.Spec.Containers), []string{"b-sidecar", "app", "a-sidecar"}; !reflect.DeepEqual(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if c := podutil.FindContainer(own.Spec.Containers, "a-sidecar"); c.Image != "mine:7" {
		t.Errorf("the pod's own a-sidecar was replaced: %s", c.Image)
	}
}

func TestSkipAnnotationNeedsAllowOptOut(t *testing.T) {
	// A user's pod with the skip annotation gets a mandatory SidecarSet's
	// sidecar, and not one that allows opting out.
	ns := env.Namespace(t)
	createSidecarSet(t, newSidecarSet("skip-"+ns, ns, "web", sidecar("skip-sidecar", "proxy:1")))
	optional := newSidecarSet("optout-"+ns, ns, "web", sidecar("optout-sidecar", "proxy:1"))
	optional.Spec.InjectionStrategy.AllowOptOut = true
	createSidecarSet(t, optional)
	p := newPod(ns, "a", map[string]string{"app": "web"}, "app")
	p.Annotations = map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
	if p = createPod(t, p); !reflect.DeepEqual(names(p.Spec.Containers), []string{"skip-sidecar", "app"}) {
		t.Errorf("a pod annotated to skip injection has containers %v, want the mandatory sidecar only", names(p.Spec.Containers))
	}
}

// TestStandbyReplicaSeesUpdatedSidecarSet: a replica that is not the
// leader runs the webhooks' informer cache but no SidecarSet controller.
// What its pod webhook injects (the compiled SidecarSet: revision, encoded
// containers) must still follow every update, from informer events alone.
func TestStandbyReplicaSeesUpdatedSidecarSet(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	standby, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	lister, err := sidecarcontrol.ListerFromCache(ctx, standby, sidecarcontrol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = standby.Start(ctx) }()
	if !standby.WaitForCacheSync(ctxT(t)) {
		t.Fatal("the standby cache did not sync")
	}

	s := createSidecarSet(t, newSidecarSet("standby-"+ns, ns, "web", sidecar("log", "log:1")))
	// Compile the first generation on the standby, as a pod admission would.
	testutil.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		cached := lister.Get(s.Name)
		return cached != nil && lister.Compiled(cached) != nil, nil
	}, "the standby replica has SidecarSet %s", s.Name)

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "log:2" })
	testutil.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		cached := lister.Get(s.Name)
		if cached == nil || cached.Spec.Containers[0].Image != "log:2" {
			return false, nil
		}
		want, _ := sidecarcontrol.Hashes(&cached.Spec)
		return lister.Compiled(cached).Hash == want, nil
	}, "the standby replica serves the updated SidecarSet %s", s.Name)
}

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
