package sidecarpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/fuzz"
)

// diffCase is one row of the differential test: SidecarSets (named with a
// prefix unique to the row; spec.namespace "@" is the row's namespace) and
// the pods created through both modes.
type diffCase struct {
	name     string
	nsLabels func(ns string) map[string]string
	sets     func(prefix, ns string) []*deckhandv1alpha1.SidecarSet
	pods     func(prefix string) []*corev1.Pod
	// skipInvalid leaves out pods the API server refuses (fuzz inputs).
	skipInvalid bool
}

const here = "@" // spec.namespace: the row's namespace

func sc(name, image string, policy deckhandv1alpha1.PodInjectPolicy) deckhandv1alpha1.SidecarContainer {
	return deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}, PodInjectPolicy: policy}
}

func set(name string, sel map[string]string, mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       deckhandv1alpha1.SidecarSetSpec{Namespace: here, Selector: &metav1.LabelSelector{MatchLabels: sel}},
	}
	mutate(s)
	return s
}

func pod(labels map[string]string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func env2(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

var web = map[string]string{"app": "web"}

func diffCases() []diffCase {
	return []diffCase{{
		name: "every field",
		sets: func(p, _ string) []*deckhandv1alpha1.SidecarSet {
			return []*deckhandv1alpha1.SidecarSet{set(p+"all", web, func(s *deckhandv1alpha1.SidecarSet) {
				native := sc("native", "proxy:1", deckhandv1alpha1.AfterAppContainer)
				native.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("init-a", "init:1", ""), native}
				log := sc("log", "fluent-bit:3", deckhandv1alpha1.BeforeAppContainer)
				log.Env = env2("A", "1", "TZ", "own", "B", "2")
				log.TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "TZ"}, {SourceContainerName: "app", EnvName: "MISSING"}, {SourceContainerName: "init-app", EnvName: "FROM_INIT"}, {SourceContainerName: "nobody", EnvName: "A"},
					// Of two transfers of one name the first wins.
					{SourceContainerName: "app", EnvName: "FROM_INIT"}, {SourceContainerName: "app", EnvName: "X"}}
				log.ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyEnabled
				log.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/sidecar"}, {Name: "logs", MountPath: "/other"}}
				log.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 2020}}
				log.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
				log.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](65534), ReadOnlyRootFilesystem: ptr.To(true)}
				after := sc("after-c", "after:1", deckhandv1alpha1.AfterAppContainer)
				after.Command, after.Args = []string{"/bin/after"}, []string{"--x=\"quoted\"", "ünïcode"}
				s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{log, after}
				s.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
				s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "sec-a"}, {Name: "sec-b"}}
			})}
		},
		pods: func(p string) []*corev1.Pod {
			return []*corev1.Pod{
				pod(web, func(pd *corev1.Pod) {
					pd.Spec.Containers[0].Env = env2("TZ", "UTC", "X", "y")
					pd.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/other"}}
					pd.Spec.Containers = append(pd.Spec.Containers, corev1.Container{Name: "app2", Image: "app:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "more", MountPath: "/more", ReadOnly: true}}})
					pd.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "more", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				}),
				// A volume and a pull secret of the SidecarSet's names, an
				// init container to transfer from.
				pod(web, func(pd *corev1.Pod) {
					pd.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
					pd.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mine"}, {Name: "sec-b"}}
					pd.Spec.InitContainers = []corev1.Container{{Name: "init-app", Image: "i:1", Env: env2("FROM_INIT", "yes")}}
					pd.Spec.Containers[0].Env = env2("FROM_INIT", "app", "X", "x")
					pd.Annotations = map[string]string{"keep": "me"}
				}),
				// The pod's own container named like a sidecar: not injected.
				pod(web, func(pd *corev1.Pod) {
					pd.Spec.Containers = append(pd.Spec.Containers, corev1.Container{Name: "log", Image: "mine:1"})
				}),
				// A record of the SidecarSet the pod came with, and a
				// container of its sidecar's name: the record is not trusted
				// (it is Deckhand's to write), so the container is the pod's
				// own, keeps the SidecarSet out, and the record is removed.
				pod(web, func(pd *corev1.Pod) {
					pd.Spec.Containers = append(pd.Spec.Containers, corev1.Container{Name: "log", Image: "fluent-bit:2"})
					pd.Annotations = map[string]string{
						deckhandv1alpha1.SidecarSetInjectedAnnotation:         p + "all",
						deckhandv1alpha1.SidecarSetHashAnnotation:             `{"` + p + `all":{"hash":"00000000000000aa","containers":["init-a","native","log","after-c"]}}`,
						deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation: `{"` + p + `all":{"hash":"00000000000000bb"}}`,
					}
				}),
				pod(web, func(pd *corev1.Pod) {
					pd.Annotations = map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
				}),
				pod(map[string]string{"app": "db"}, nil),
			}
		},
	}, {
		name: "several SidecarSets on one pod",
		sets: func(p, _ string) []*deckhandv1alpha1.SidecarSet {
			return []*deckhandv1alpha1.SidecarSet{
				set(p+"a", web, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("a-init", "i:1", "")}
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("a-before", "a:1", ""), sc("a-after", "a:1", deckhandv1alpha1.AfterAppContainer), sc("a-before2", "a:1", "")}
					s.Spec.Volumes = []corev1.Volume{{Name: "a-vol", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
					s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "a-sec"}}
				}),
				set(p+"b", web, func(s *deckhandv1alpha1.SidecarSet) {
					native := sc("b-native", "b:1", deckhandv1alpha1.AfterAppContainer)
					native.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
					s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{native, sc("b-init", "b:1", "")}
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("b-before", "b:1", ""), sc("b-after", "b:1", deckhandv1alpha1.AfterAppContainer)}
					s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "b-sec"}}
				}),
				set(p+"c", map[string]string{"tier": "front"}, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("c-init", "c:1", ""), sc("c-init-after", "c:1", deckhandv1alpha1.AfterAppContainer)}
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("c-after", "c:1", deckhandv1alpha1.AfterAppContainer), sc("c-before", "c:1", "")}
					s.Spec.Volumes = []corev1.Volume{{Name: "c-vol", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "c-vol2", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
					s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "c-sec"}}
				}),
			}
		},
		pods: func(string) []*corev1.Pod {
			all := map[string]string{"app": "web", "tier": "front"}
			return []*corev1.Pod{
				pod(all, nil),
				pod(all, func(pd *corev1.Pod) {
					pd.Spec.InitContainers = []corev1.Container{{Name: "own-init", Image: "i:1"}}
					pd.Spec.Containers = append(pd.Spec.Containers, corev1.Container{Name: "app2", Image: "x:1"})
					pd.Spec.Volumes = []corev1.Volume{{Name: "own", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
					pd.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "own"}}
				}),
				// A volume and pull secret of the first SidecarSet's names.
				pod(all, func(pd *corev1.Pod) {
					pd.Spec.Volumes = []corev1.Volume{{Name: "a-vol", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
					pd.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "a-sec"}}
				}),
				// The middle SidecarSet's container: b is not injected.
				pod(all, func(pd *corev1.Pod) {
					pd.Spec.Containers = append(pd.Spec.Containers, corev1.Container{Name: "b-after", Image: "mine:1"})
				}),
				pod(web, nil), // a and b only
			}
		},
	}, {
		name:     "namespace scoping and paused injection",
		nsLabels: func(ns string) map[string]string { return map[string]string{"team": ns} },
		sets: func(p, ns string) []*deckhandv1alpha1.SidecarSet {
			return []*deckhandv1alpha1.SidecarSet{
				set(p+"by-label", web, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.Namespace = ""
					s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": ns}}
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("by-label", "x:1", "")}
				}),
				set(p+"elsewhere", web, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.Namespace = "default"
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("elsewhere", "x:1", "")}
				}),
				set(p+"paused", web, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("paused", "x:1", "")}
					s.Spec.InjectionStrategy.Paused = true
				}),
				set(p+"wrong-label", web, func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.Namespace = ""
					s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}
					s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{sc("wrong-label", "x:1", "")}
				}),
			}
		},
		pods: func(string) []*corev1.Pod { return []*corev1.Pod{pod(web, nil)} },
	}, {
		name:        "the fuzz corpus",
		nsLabels:    func(string) map[string]string { return map[string]string{"env": "fuzz"} },
		sets:        fuzzSets,
		pods:        fuzzPods,
		skipInvalid: true,
	}}
}

// TestPolicyModeInjectsAsTheWebhook: for every row, the pods admitted with
// the SidecarSets in Webhook mode (Deckhand's pod webhook) and then in
// Policy mode (the API server applying the compiled policies) have the same
// spec and annotations.
func TestPolicyModeInjectsAsTheWebhook(t *testing.T) {
	for i, c := range diffCases() {
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := ctxT(t)
			if c.nsLabels != nil {
				nsObj := testutil.Get(ctx, t, env.Client, types.NamespacedName{Name: ns}, &corev1.Namespace{})
				if nsObj.Labels == nil {
					nsObj.Labels = map[string]string{}
				}
				for k, v := range c.nsLabels(ns) {
					nsObj.Labels[k] = v
				}
				if err := env.Client.Update(ctx, nsObj); err != nil {
					t.Fatal(err)
				}
			}
			prefix := fmt.Sprintf("d%d-%s-", i, ns[len(ns)-5:])
			sets := c.sets(prefix, ns)
			for _, s := range sets {
				if s.Spec.Namespace == here {
					s.Spec.Namespace = ns
				}
				s.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
				createSidecarSet(t, s)
			}
			for _, s := range sets {
				waitCached(t, s.Name, 1)
			}
			pods := c.pods(prefix)
			var byWebhook []*corev1.Pod
			var valid []*corev1.Pod
			for j, p := range pods {
				p.Namespace, p.Name = ns, "w-"+strconv.Itoa(j)
				got, err := createPod(ctx, p, false)
				if apierrors.IsInvalid(err) && c.skipInvalid {
					continue // a corpus pod the API server refuses in either mode
				}
				if err != nil {
					t.Fatalf("creating pod %d through the webhook: %v", j, err)
				}
				byWebhook = append(byWebhook, got)
				valid = append(valid, p)
			}
			pods = valid
			t.Logf("%d pods, %d SidecarSets", len(pods), len(sets))
			for _, s := range sets {
				gen := updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection })
				waitCached(t, s.Name, gen)
			}
			for _, s := range sets {
				waitPolicyReady(t, s.Name)
			}
			// The API server picks new policies up within a second or two:
			// wait until dry runs record what the webhook recorded.
			for j, p := range pods {
				p.Name = "p-" + strconv.Itoa(j)
				var last string
				testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
					got, err := createPod(ctx, p, true)
					if err != nil {
						return false, err
					}
					w := byWebhook[j].Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation]
					last = got.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation]
					return last == w, nil
				}, "pod %d admitted in Policy mode records %q (last: %s)", j, byWebhook[j].Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation], lazy(func() string { return last }))
			}
			for j, p := range pods {
				got, err := createPod(ctx, p, false)
				if err != nil {
					t.Fatalf("creating pod %d through the policies: %v", j, err)
				}
				w := byWebhook[j]
				normalize(w)
				normalize(got)
				if !apiequality.Semantic.DeepEqual(w.Spec, got.Spec) || !apiequality.Semantic.DeepEqual(w.Annotations, got.Annotations) {
					wj, _ := json.Marshal(map[string]any{"annotations": w.Annotations, "spec": w.Spec})
					pj, _ := json.Marshal(map[string]any{"annotations": got.Annotations, "spec": got.Spec})
					t.Errorf("pod %d differs between the modes:\nwebhook: %s\npolicy:  %s", j, wj, pj)
				}
			}
		})
	}
}

// fuzzSets are FuzzSidecarInjection's SidecarSets, limited to the row's
// namespace.
func fuzzSets(prefix, _ string) []*deckhandv1alpha1.SidecarSet {
	var out []*deckhandv1alpha1.SidecarSet
	for _, raw := range fuzz.InjectionSeedSidecarSets {
		s := &deckhandv1alpha1.SidecarSet{}
		if err := json.Unmarshal([]byte(raw), s); err != nil {
			panic(err)
		}
		s.Name = prefix + s.Name
		s.Spec.Namespace = here
		out = append(out, s)
	}
	return out
}

// fuzzPods are FuzzSidecarInjection's seed pods and the pods of its corpus
// (test/fuzz/testdata), those that decode into a pod with containers
// (images filled in where missing, so that the API server accepts them).
func fuzzPods(string) []*corev1.Pod {
	raws := append([]string(nil), fuzz.InjectionSeedPods...)
	root, err := localcluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	dir := filepath.Join(root, "test", "fuzz", "testdata", "fuzz", "FuzzSidecarInjection")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		lines := strings.Split(string(data), "\n")
		if len(lines) > 1 && strings.HasPrefix(lines[1], "[]byte(") {
			if s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")); err == nil {
				raws = append(raws, s)
			}
		}
	}
	const maxPods = 40 // bounded: every pod is created twice
	var out []*corev1.Pod
	for _, raw := range raws {
		p := &corev1.Pod{}
		if json.Unmarshal([]byte(raw), p) != nil || len(p.Spec.Containers) == 0 {
			continue
		}
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Image == "" {
				p.Spec.Containers[i].Image = "x:1"
			}
		}
		for i := range p.Spec.InitContainers {
			if p.Spec.InitContainers[i].Image == "" {
				p.Spec.InitContainers[i].Image = "x:1"
			}
		}
		p.GenerateName = ""
		if len(out) < maxPods {
			out = append(out, p)
		}
	}
	return out
}

// normalize names the service-account token volume, whose name the API
// server makes up for every pod, the same in every pod.
func normalize(p *corev1.Pod) {
	var generated string
	for i := range p.Spec.Volumes {
		if strings.HasPrefix(p.Spec.Volumes[i].Name, "kube-api-access-") {
			generated = p.Spec.Volumes[i].Name
			p.Spec.Volumes[i].Name = "kube-api-access"
		}
	}
	if generated == "" {
		return
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			for k := range list[i].VolumeMounts {
				if list[i].VolumeMounts[k].Name == generated {
					list[i].VolumeMounts[k].Name = "kube-api-access"
				}
			}
		}
	}
}

// A revision pinned with policy Always is compiled into the policy: a pod
// the API server injects in Policy mode is the pod the webhook injects in
// Webhook mode, with the pinned revision's sidecar and hash.
func TestPinnedRevisionIsCompiledIntoThePolicy(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("pinned-"+ns, ns, "log:1")
	s.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
	s.Labels = map[string]string{deckhandv1alpha1.SidecarSetCustomVersionLabel: "v1"}
	createSidecarSet(t, s)
	pinnedHash := waitSidecarSet(t, time.Minute, s.Name, "records its first revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevisionName != ""
	}).Status.LatestRevision

	gen := updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "log:2"
		s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] = "v2"
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1")}
	})
	waitCached(t, s.Name, gen)
	byWebhook := createWebPod(t, ns, "w")
	if image, rev := injected(byWebhook); image != "log:1" || rev != pinnedHash {
		t.Fatalf("webhook mode, pinned: log sidecar %q at %s, want log:1 at %s", image, rev, pinnedHash)
	}

	gen = updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection })
	waitCached(t, s.Name, gen)
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, logImage, "log:1")
	byPolicy, err := createPod(ctxT(t), webPod(ns, "p"), true)
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(byPolicy.Annotations).Revisions(s.Name); rev != pinnedHash {
		t.Fatalf("policy mode, pinned: the pod records %s, want the pinned %s", rev, pinnedHash)
	}
	normalize(byWebhook)
	normalize(byPolicy)
	if !apiequality.Semantic.DeepEqual(byWebhook.Spec, byPolicy.Spec) || !apiequality.Semantic.DeepEqual(byWebhook.Annotations, byPolicy.Annotations) {
		wj, _ := json.Marshal(map[string]any{"annotations": byWebhook.Annotations, "spec": byWebhook.Spec})
		pj, _ := json.Marshal(map[string]any{"annotations": byPolicy.Annotations, "spec": byPolicy.Spec})
		t.Errorf("the pinned pod differs between the modes:\nwebhook: %s\npolicy:  %s", wj, pj)
	}
}
