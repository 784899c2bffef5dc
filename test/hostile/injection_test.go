package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// injectedSidecarSet is a SidecarSet, limited to namespace ns, that injects
// a container called sidecar into the pods labelled inject=<label>.
func injectedSidecarSet(ns, label string, sidecar corev1.Container) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "inj-" + label},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:  ns,
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"inject": label}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: sidecar}},
		},
	}
}

// createSidecarSet creates s and deletes it when the test ends.
func createSidecarSet(t *testing.T, s *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	testutil.Create(ctx(t, time.Minute), t, suite.Client, s)
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), s) })
}

// labelledPod is a pod of namespace ns labelled inject=<label>.
func labelledPod(ns, name, label string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"inject": label}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
	}
}

// waitInjecting waits until the pod webhook injects the SidecarSet whose
// sidecar is called sidecar into a pod labelled inject=<label> in ns (its
// cache has the SidecarSet), by dry-run creates.
func waitInjecting(t *testing.T, ns, label, sidecar string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		p := labelledPod(ns, "probe", label)
		if err := suite.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return podutil.FindContainer(p.Spec.Containers, sidecar) != nil, nil
	}, "the pod webhook injects %s", sidecar)
}

// A pod's skip-injection annotation does not keep a mandatory sidecar out;
// a SidecarSet that allows opting out (spec.injectionStrategy.allowOptOut)
// honours it.
func TestInjectionMandatorySidecar(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	mandatory, optional := "m-"+utilrand.String(5), "o-"+utilrand.String(5)
	createSidecarSet(t, injectedSidecarSet(ns, mandatory, corev1.Container{Name: "audit", Image: "registry.example/audit:1"}))
	opt := injectedSidecarSet(ns, optional, corev1.Container{Name: "helper", Image: "registry.example/helper:1"})
	opt.Spec.InjectionStrategy.AllowOptOut = true
	createSidecarSet(t, opt)
	waitInjecting(t, ns, mandatory, "audit")
	waitInjecting(t, ns, optional, "helper")

	c := ctx(t, time.Minute)
	skip := map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
	p := labelledPod(ns, "opts-out-of-mandatory", mandatory)
	p.Annotations = skip
	testutil.Create(c, t, suite.Client, p)
	if podutil.FindContainer(p.Spec.Containers, "audit") == nil {
		t.Errorf("a pod with %s=true was admitted without the mandatory sidecar: containers %v", deckhandv1alpha1.SidecarSetSkipInjectionAnnotation, names(p.Spec.Containers))
	}
	q := labelledPod(ns, "opts-out-of-optional", optional)
	q.Annotations = skip
	testutil.Create(c, t, suite.Client, q)
	if podutil.FindContainer(q.Spec.Containers, "helper") != nil {
		t.Errorf("a pod with %s=true got the sidecar of a SidecarSet with allowOptOut", deckhandv1alpha1.SidecarSetSkipInjectionAnnotation)
	}

	// Deckhand creates a PodSet's pods as its own user: the annotation in a
	// tenant's template does not make them Deckhand's dry runs.
	ps := testutil.PodSet(ns, "tenant", 1, map[string]string{"inject": mandatory}, app)
	ps.Spec.Template.Annotations = skip
	testutil.Create(c, t, suite.Client, ps)
	var owned *corev1.Pod
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := testutil.LivePods(ctx, suite.Client, ns, map[string]string{"inject": mandatory})
		for i := range pods {
			if len(pods[i].OwnerReferences) > 0 {
				owned = &pods[i]
			}
		}
		return owned != nil, err
	}, "the PodSet's pod exists")
	if podutil.FindContainer(owned.Spec.Containers, "audit") == nil {
		t.Errorf("the PodSet's pod %s, created by Deckhand from a template with %s=true, lacks the mandatory sidecar: containers %v",
			owned.Name, deckhandv1alpha1.SidecarSetSkipInjectionAnnotation, names(owned.Spec.Containers))
	}
}

// Deckhand's own dry runs keep working with a mandatory SidecarSet that
// selects every pod without labels in the dry-run namespace: the synthetic
// pod validating another SidecarSet carries the skip-injection annotation
// and is created by Deckhand's own user, so it is left alone. Injected, its
// hostPort would clash with the mandatory sidecar's and refuse a valid
// SidecarSet.
func TestInjectionOwnDryRunsSkipped(t *testing.T) {
	ensureDeckhand(t)
	const port = 18079
	key := "unlabelled-" + utilrand.String(5)
	grab := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "grab-" + key},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: "default",
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: key, Operator: metav1.LabelSelectorOpDoesNotExist}}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "grab", Image: "registry.example/grab:1",
				Ports: []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}}}},
		},
	}
	createSidecarSet(t, grab)
	// The pod webhook has the mandatory SidecarSet once it injects an
	// unlabelled pod of the namespace.
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{app}}}
		if err := suite.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return podutil.FindContainer(p.Spec.Containers, "grab") != nil, nil
	}, "the pod webhook injects the mandatory SidecarSet into unlabelled pods")

	other := injectedSidecarSet("", "other-"+key, corev1.Container{Name: "other", Image: "registry.example/other:1",
		Ports: []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}})
	if err := suite.Client.Create(ctx(t, time.Minute), other); err != nil {
		t.Fatalf("a valid SidecarSet was refused (its validation's dry-run pod was injected?): %v", err)
	}
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), other) })
}

// A pod that comes with a forged injection record is not trusted as
// injected: the record is dropped at admission, the pod's own container
// named like the sidecar keeps the SidecarSet out, and the controller
// counts the pod as not injected. A record written onto a pod afterwards
// that names a sidecar the pod lacks does not count either.
func TestInjectionForgedRecord(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	label := "f-" + utilrand.String(5)
	s := injectedSidecarSet(ns, label, corev1.Container{Name: "guard", Image: "registry.example/guard:1"})
	createSidecarSet(t, s)
	waitInjecting(t, ns, label, "guard")
	c := ctx(t, 2*time.Minute)
	if err := suite.Client.Get(c, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	hash, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	forged := map[string]string{
		deckhandv1alpha1.SidecarSetInjectedAnnotation:         s.Name,
		deckhandv1alpha1.SidecarSetHashAnnotation:             fmt.Sprintf(`{%q:{"hash":%q,"containers":["guard"]}}`, s.Name, hash),
		deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation: fmt.Sprintf(`{%q:{"hash":%q}}`, s.Name, withoutImage),
	}

	// The pod brings its own "guard" and a record saying it is the sidecar.
	fake := labelledPod(ns, "fake-guard", label)
	fake.Annotations = forged
	fake.Spec.Containers = append(fake.Spec.Containers, corev1.Container{Name: "guard", Image: "registry.example/not-the-guard:1"})
	testutil.Create(c, t, suite.Client, fake)
	if sidecarcontrol.ReadPodRecord(fake.Annotations).Has(s.Name) {
		t.Errorf("the forged record was kept: %v", fake.Annotations)
	}

	// The pod brings only the record: it gets the sidecar, recorded by Deckhand.
	bare := labelledPod(ns, "record-only", label)
	bare.Annotations = forged
	testutil.Create(c, t, suite.Client, bare)
	if g := podutil.FindContainer(bare.Spec.Containers, "guard"); g == nil || g.Image != "registry.example/guard:1" {
		t.Errorf("a pod with a forged record was admitted without the sidecar: containers %v", names(bare.Spec.Containers))
	}

	// A pod admitted without the sidecar (not selected then) whose record is
	// written afterwards, naming the sidecar it lacks.
	late := labelledPod(ns, "late-record", "none")
	testutil.Create(c, t, suite.Client, late)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"inject": label}, "annotations": forged}})
	if err := suite.Client.Patch(c, late, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}

	// bare is injected; fake and late are selected and not injected.
	var last deckhandv1alpha1.SidecarSetStatus
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return false, err
		}
		if st := s.Status; st.MatchedPods != last.MatchedPods || st.NotInjectedPods != last.NotInjectedPods {
			t.Logf("status: matched %d, notInjected %d", st.MatchedPods, st.NotInjectedPods)
		}
		last = s.Status
		return last.MatchedPods == 1 && last.NotInjectedPods == 2, nil
	}, "the SidecarSet counts 1 pod injected and 2 (forged records) not injected")
}

// Shared mounts are read-only in the sidecar, never laid over the sidecar's
// own mount paths (compared cleaned), and a subPathExpr mount brings the
// variables it expands.
func TestInjectionSharedMounts(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	label := "v-" + utilrand.String(5)
	s := injectedSidecarSet(ns, label, corev1.Container{Name: "reader", Image: "registry.example/reader:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "reader-conf", MountPath: "/etc/reader"}}})
	s.Spec.Containers[0].ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyEnabled
	s.Spec.Volumes = []corev1.Volume{{Name: "reader-conf", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	createSidecarSet(t, s)
	waitInjecting(t, ns, label, "reader")

	p := labelledPod(ns, "mounts", label)
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: emptyDir}, {Name: "evil", VolumeSource: emptyDir}, {Name: "logs", VolumeSource: emptyDir}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "evil", MountPath: "/etc/reader/"},
		{Name: "evil", MountPath: "/etc//reader/reader.conf", SubPath: "conf"},
		{Name: "logs", MountPath: "/var/log/app", SubPathExpr: "$(POD_NAME)"},
	}
	testutil.Create(ctx(t, time.Minute), t, suite.Client, p)
	r := podutil.FindContainer(p.Spec.Containers, "reader")
	if r == nil {
		t.Fatalf("not injected: containers %v", names(p.Spec.Containers))
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range r.VolumeMounts {
		mounts[m.MountPath] = m
		if m.Name == "evil" {
			t.Errorf("the app's mount %+v lies over the sidecar's own /etc/reader", m)
		}
	}
	if m, ok := mounts["/data"]; !ok || !m.ReadOnly {
		t.Errorf("the shared /data is %+v in the sidecar, want it readOnly", m)
	}
	if m, ok := mounts["/var/log/app"]; !ok || !m.ReadOnly || m.SubPathExpr != "$(POD_NAME)" {
		t.Errorf("the shared /var/log/app is %+v in the sidecar, want it readOnly with its subPathExpr", m)
	}
	var env *corev1.EnvVar
	for i := range r.Env {
		if r.Env[i].Name == "POD_NAME" {
			env = &r.Env[i]
		}
	}
	if env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil || env.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("the sidecar's POD_NAME is %+v, want the app's (metadata.name): its subPathExpr would expand to another path", env)
	}
}

// kube-public is protected by default: no SidecarSet reaches its pods.
func TestInjectionKubePublicProtected(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	label := "p-" + utilrand.String(5)
	s := injectedSidecarSet("", label, corev1.Container{Name: "everywhere", Image: "registry.example/everywhere:1"})
	createSidecarSet(t, s)
	waitInjecting(t, ns, label, "everywhere")
	p := labelledPod(metav1.NamespacePublic, "public-"+label, label)
	if err := suite.Client.Create(ctx(t, time.Minute), p, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if podutil.FindContainer(p.Spec.Containers, "everywhere") != nil {
		t.Errorf("a pod in kube-public was injected")
	}
}

// No SidecarSet may patch an annotation in Deckhand's domain or any of its
// subdomains, whatever the allowlist says.
func TestInjectionReservedAnnotationDomains(t *testing.T) {
	ensureDeckhand(t)
	for _, key := range []string{"apps.deckhand.dev/sidecarsets", "podset.apps.deckhand.dev/controller-uid", "version.sidecarset.apps.deckhand.dev/mesh"} {
		s := injectedSidecarSet("", "meta-"+utilrand.String(5), corev1.Container{Name: "meta", Image: "registry.example/meta:1"})
		s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{key: "forged"}}}
		err := suite.Client.Create(ctx(t, time.Minute), s)
		path := fmt.Sprintf("spec.patchPodMetadata[0].annotations[%s]", key)
		wantInvalid(t, key, err, path)
		if err != nil && !strings.Contains(err.Error(), "Deckhand's own") {
			t.Errorf("%s: refused with %v, want it refused as Deckhand's own", key, err)
		}
		if err == nil {
			_ = suite.Client.Delete(context.Background(), s)
		}
	}
}

func names(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// A namespace labelled apps.deckhand.dev/sidecarset-injection=disabled is
// out of every SidecarSet, a mandatory cluster-wide one included: the API
// server never calls the pod webhook for its pods (the webhook counts no
// request), its pods keep their own containers, and the SidecarSet counts
// them neither as matched nor as not injected.
func TestNamespaceOptsOutOfSidecarSets(t *testing.T) {
	d := replaceManager(t, "deckhand-opt-out")
	in, out := testutil.Namespace(t, suite.Client), testutil.Namespace(t, suite.Client)
	testutil.Update(t, suite.Client, time.Minute, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: out}}, func(ns *corev1.Namespace) {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[deckhandv1alpha1.SidecarSetInjectionLabel] = deckhandv1alpha1.SidecarSetInjectionDisabled
	})
	label := "optout-" + utilrand.String(5)
	s := injectedSidecarSet("", label, corev1.Container{Name: "audit", Image: "registry.example/audit:1"})
	createSidecarSet(t, s)
	waitInjecting(t, in, label, "audit")
	c := ctx(t, 2*time.Minute)
	podRequests := func() float64 {
		return metricSum(scrape(t, d), "controller_runtime_webhook_requests_total", fmt.Sprintf("webhook=%q", inject.PodWebhookPath))
	}

	before := podRequests()
	skipped := labelledPod(out, "skipped", label)
	testutil.Create(c, t, suite.Client, skipped)
	if podutil.FindContainer(skipped.Spec.Containers, "audit") != nil {
		t.Errorf("a pod of the opted-out namespace got the sidecar: %v", skipped.Spec.Containers)
	}
	if after := podRequests(); after != before {
		t.Errorf("the pod webhook counted %v requests for a pod of the opted-out namespace, want none", after-before)
	}

	// The same pod in another namespace is injected, and counted.
	injected := labelledPod(in, "injected", label)
	testutil.Create(c, t, suite.Client, injected)
	if podutil.FindContainer(injected.Spec.Containers, "audit") == nil {
		t.Errorf("a pod of %s was not injected: %v", in, injected.Spec.Containers)
	}
	if after := podRequests(); after <= before {
		t.Errorf("the pod webhook counts %v requests after injecting a pod, %v before", after, before)
	}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
		return err == nil && s.Status.ObservedGeneration == s.Generation && s.Status.MatchedPods == 1 && s.Status.NotInjectedPods == 0, err
	}, "the SidecarSet counts the one pod outside the opted-out namespace, and no pod it did not inject (status %v)", lazy(func() string { return fmt.Sprintf("%+v", s.Status) }))
}
