package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// invalidCase is one bad object: built from a valid one by mutate, created
// (or, with update, created valid and then changed) against the real API
// server with every Deckhand webhook installed, and refused with a message
// that names field.
type invalidCase struct {
	name   string
	obj    func(ns string) client.Object
	update bool
	mutate func(client.Object)
	field  string
}

func validPodSet(ns string) client.Object {
	labels := map[string]string{"app": "web"}
	return testutil.PodSet(ns, "ps-"+utilrand.String(5), 0, labels, corev1.Container{Name: "app", Image: "nginx"})
}

func validWebServer(ns string) client.Object {
	return &deckhandv1alpha1.WebServer{
		ObjectMeta: metav1.ObjectMeta{Name: "ws-" + utilrand.String(5), Namespace: ns},
		Spec:       deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0)},
	}
}

func validRestartSchedule(ns string) client.Object {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-" + utilrand.String(5), Namespace: ns},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule: "0 3 * * *", TimeZone: "Europe/Paris", Suspend: true,
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}},
		},
	}
}

// validSidecarSet is a valid SidecarSet scoped to namespace ns.
//
// Each gets a selector of its own: the webhook refuses a SidecarSet whose
// container names clash with another that can match the same pods, and an
// earlier case's object, deleted a moment ago, may still be in its cache.
func validSidecarSet(ns string) client.Object {
	name := "scs-" + utilrand.String(6)
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:  ns,
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: "fluent-bit:3"}}},
		},
	}
}

// validHotSidecarSet is validSidecarSet with a second sidecar, mesh, that
// is HotUpgrade.
func validHotSidecarSet(ns string) client.Object {
	s := validSidecarSet(ns).(*deckhandv1alpha1.SidecarSet)
	s.Spec.Containers = append(s.Spec.Containers, deckhandv1alpha1.SidecarContainer{
		Container:       corev1.Container{Name: "mesh", Image: "mesh:1"},
		UpgradeStrategy: &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "mesh-empty:1"},
	})
	return s
}

func ps(f func(*deckhandv1alpha1.PodSet)) func(client.Object) {
	return func(o client.Object) { f(o.(*deckhandv1alpha1.PodSet)) }
}
func ws(f func(*deckhandv1alpha1.WebServer)) func(client.Object) {
	return func(o client.Object) { f(o.(*deckhandv1alpha1.WebServer)) }
}
func rs(f func(*deckhandv1alpha1.RestartSchedule)) func(client.Object) {
	return func(o client.Object) { f(o.(*deckhandv1alpha1.RestartSchedule)) }
}
func scs(f func(*deckhandv1alpha1.SidecarSet)) func(client.Object) {
	return func(o client.Object) { f(o.(*deckhandv1alpha1.SidecarSet)) }
}

func invalidCases() []invalidCase {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	return []invalidCase{
		// PodSet
		{"podset negative replicas", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To[int32](-1) }), "spec.replicas"},
		{"podset negative minReadySeconds", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.MinReadySeconds = -5 }), "spec.minReadySeconds"},
		{"podset no selector", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Selector = nil }), "spec.selector"},
		{"podset empty selector", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Selector = &metav1.LabelSelector{} }), "spec.selector"},
		{"podset selector misses the template", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Labels = map[string]string{"app": "db"} }), "spec.template.metadata.labels"},
		{"podset bad selector operator", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) {
			p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}), "spec.selector"},
		{"podset restartPolicy Never", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }), "spec.template.spec.restartPolicy"},
		{"podset activeDeadlineSeconds", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }), "spec.template.spec.activeDeadlineSeconds"},
		{"podset no containers", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Spec.Containers = nil }), "spec.template.spec.containers"},
		{"podset invalid container name", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Spec.Containers[0].Name = "Bad_Name" }), "spec.template.spec.containers[0].name"},
		{"podset container without image", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.Template.Spec.Containers[0].Image = "" }), "spec.template.spec.containers[0].image"},
		{"podset unknown strategy", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.UpdateStrategy.Type = "Recreate" }), "spec.updateStrategy.type"},
		{"podset maxUnavailable 150%", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.UpdateStrategy.MaxUnavailable = pct("150%") }), "spec.updateStrategy.maxUnavailable"},
		{"podset maxSurge not a percentage", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.UpdateStrategy.MaxSurge = pct("lots") }), "spec.updateStrategy.maxSurge"},
		{"podset maxSurge and maxUnavailable both 0", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) {
			p.Spec.UpdateStrategy.MaxSurge, p.Spec.UpdateStrategy.MaxUnavailable = num(0), pct("0%")
		}), "spec.updateStrategy"},
		{"podset negative partition", validPodSet, false, ps(func(p *deckhandv1alpha1.PodSet) { p.Spec.UpdateStrategy.Partition = ptr.To[int32](-1) }), "spec.updateStrategy.partition"},
		{"podset selector changed", validPodSet, true, ps(func(p *deckhandv1alpha1.PodSet) {
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "x"}}
			p.Spec.Template.Labels["tier"] = "x"
		}), "spec.selector"},

		// WebServer
		{"webserver no image", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Image = "" }), "spec.image"},
		{"webserver upper-case image", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Image = "Nginx:1.27" }), "spec.image"},
		{"webserver port 0", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Port = -1 }), "spec.port"},
		{"webserver port 70000", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Port = 70000 }), "spec.port"},
		{"webserver negative replicas", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Replicas = ptr.To[int32](-1) }), "spec.replicas"},
		{"webserver ExternalName service", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.ServiceType = corev1.ServiceTypeExternalName }), "spec.serviceType"},
		{"webserver name not a DNS-1035 label", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Name = "9site-" + utilrand.String(4) }), "metadata.name"},
		{"webserver duplicate env", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}
		}), "spec.env[1]"},
		{"webserver env name with =", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.Env = []corev1.EnvVar{{Name: "A=B", Value: "1"}} }), "spec.env[0].name"},
		{"webserver env value and valueFrom", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}), "spec.env[0].valueFrom"},
		{"webserver requests above limits", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}), "spec.resources.requests[cpu]"},
		{"webserver podLabels overrides its selector", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.PodLabels = map[string]string{"app.kubernetes.io/instance": "other"}
		}), "spec.podLabels"},
		{"webserver invalid podLabels key", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.PodLabels = map[string]string{"bad key!": "v"} }), "spec.podLabels"},
		{"webserver invalid podAnnotations key", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.PodAnnotations = map[string]string{"-bad-": "v"} }), "spec.podAnnotations"},
		{"webserver probe without handler", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) { w.Spec.ReadinessProbe = &corev1.Probe{PeriodSeconds: 5} }), "spec.readinessProbe"},
		{"webserver probe port 0", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(0)}}}
		}), "spec.readinessProbe.tcpSocket.port"},
		{"webserver probe negative period", validWebServer, false, ws(func(w *deckhandv1alpha1.WebServer) {
			w.Spec.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}, PeriodSeconds: -1}
		}), "spec.readinessProbe.periodSeconds"},

		// RestartSchedule
		{"restartschedule cron syntax", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "every night" }), "spec.schedule"},
		{"restartschedule never fires", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "0 0 31 2 *" }), "spec.schedule"},
		{"restartschedule time zone in the schedule", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "CRON_TZ=UTC 0 3 * * *" }), "spec.schedule"},
		{"restartschedule @every 0s", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "@every 0s" }), "spec.schedule"},
		{"restartschedule unknown time zone", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.TimeZone = "Mars/Olympus" }), "spec.timeZone"},
		{"restartschedule Local time zone", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.TimeZone = "Local" }), "spec.timeZone"},
		{"restartschedule targetRef and selector", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Target.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), "spec.target"},
		{"restartschedule no target", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef = nil }), "spec.target"},
		{"restartschedule target kind Pod", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef.Kind = "Pod" }), "spec.target.targetRef.kind"},
		{"restartschedule target without name", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Target.TargetRef.Name = "" }), "spec.target.targetRef.name"},
		{"restartschedule startingDeadlineSeconds 0", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.StartingDeadlineSeconds = ptr.To[int64](0) }), "spec.startingDeadlineSeconds"},
		{"restartschedule maxConcurrent -1", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.MaxConcurrent = -1 }), "spec.maxConcurrent"},
		{"restartschedule negative rolloutTimeout", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.RolloutTimeout = &metav1.Duration{Duration: -time.Second}
		}), "spec.rolloutTimeout"},
		{"restartschedule historyLimit 1000", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.HistoryLimit = 1000 }), "spec.historyLimit"},
		{"restartschedule concurrencyPolicy Allow", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.ConcurrencyPolicy = "Allow" }), "spec.concurrencyPolicy"},
		{"restartschedule schedule changed to invalid", validRestartSchedule, true, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Schedule = "61 * * * *" }), "spec.schedule"},
		{"restartschedule window day Monday", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Days: []deckhandv1alpha1.RestartWeekday{"Monday"}, Start: "01:00", End: "02:00"}}
		}), "spec.windows[0].days[0]"},
		{"restartschedule window start 25:00", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "25:00", End: "02:00"}}
		}), "spec.windows[0].start"},
		{"restartschedule empty window", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: "02:00", End: "02:00"}}
		}), "spec.windows[0].end"},
		{"restartschedule blackout 2026-02-30", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.BlackoutDates = []string{"2026-02-30"} }), "spec.blackoutDates[0]"},
		{"restartschedule blackout range backwards", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) {
			r.Spec.BlackoutDates = []string{"2026-12-24", "2027-01-05/2026-12-20"}
		}), "spec.blackoutDates"},
		{"restartschedule jitter 48h", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.Jitter = &metav1.Duration{Duration: 48 * time.Hour} }), "spec.jitter"},
		{"restartschedule failurePolicy Abort", validRestartSchedule, false, rs(func(r *deckhandv1alpha1.RestartSchedule) { r.Spec.FailurePolicy = "Abort" }), "spec.failurePolicy"},

		// SidecarSet
		{"sidecarset empty selector", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} }), "spec.selector"},
		{"sidecarset invalid namespace", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Namespace = "Not_A_Namespace" }), "spec.namespace"},
		{"sidecarset no containers", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers = nil }), "spec.containers"},
		{"sidecarset container without image", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" }), "spec.containers[0].image"},
		{"sidecarset invalid container name", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "Bad_Name" }), "spec.containers[0].name"},
		{"sidecarset duplicate container names", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers = append(s.Spec.Containers, s.Spec.Containers[0])
		}), "spec.containers[1].name"},
		{"sidecarset unknown podInjectPolicy", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].PodInjectPolicy = "Middle" }), "spec.containers[0].podInjectPolicy"},
		{"sidecarset unknown injectionMode", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = "Telepathy" }), "spec.injectionMode"},
		{"sidecarset unknown shareVolumePolicy", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].ShareVolumePolicy.Type = "sometimes" }), "spec.containers[0].shareVolumePolicy.type"},
		{"sidecarset transferEnv without source", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{EnvName: "TZ"}}
		}), "spec.containers[0].transferEnv[0].sourceContainerName"},
		{"sidecarset restartPolicy on a container", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}), "spec.containers[0].restartPolicy"},
		{"sidecarset unknown update strategy", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Type = "Recreate" }), "spec.updateStrategy.type"},
		{"sidecarset unknown recreate policy", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Recreate = "Delete" }), "spec.updateStrategy.recreate"},
		{"sidecarset recreate Evict under NotUpdate", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = deckhandv1alpha1.NotUpdateSidecarSetStrategy
			s.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
		}), "spec.updateStrategy.recreate"},
		{"sidecarset maxUnavailable 0", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = num(0) }), "spec.updateStrategy.maxUnavailable"},
		{"sidecarset partition and selector", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = num(1)
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}), "spec.updateStrategy"},
		{"sidecarset duplicate volumes", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			v := corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
			s.Spec.Volumes = []corev1.Volume{v, v}
		}), "spec.volumes[1].name"},
		{"sidecarset negative revisionHistoryLimit", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](-1) }), "spec.revisionHistoryLimit"},
		{"sidecarset pin by both name and custom version", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("a"), CustomVersion: ptr.To("v1")}
		}), "spec.injectionStrategy.revision.revisionName"},
		{"sidecarset pin to a custom version no revision carries", validSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("never-made")}
		}), "spec.injectionStrategy.revision.customVersion"},
		{"sidecarset pin to a revision that does not exist", validSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("no-such-revision")}
		}), "spec.injectionStrategy.revision.revisionName"},
		{"sidecarset pin policy Partial in Policy mode", validSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
			s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("x"), Policy: deckhandv1alpha1.PartialInjectRevision}
		}), "spec.injectionStrategy.revision.policy"},
		{"sidecarset negative requests", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
		}), "spec.containers[0].resources.requests[memory]"},
		{"sidecarset priorityStrategy with weight and order", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{
				WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}},
				OrderPriority:  []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "wave"}},
			}
		}), "spec.updateStrategy.priorityStrategy"},
		{"sidecarset priorityStrategy weight out of range", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{
				WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 101, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}},
			}
		}), "spec.updateStrategy.priorityStrategy.weightPriority[0].weight"},
		{"sidecarset priorityStrategy selector that does not parse", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{
				WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 10, MatchSelector: metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"db"}}}}}},
			}
		}), "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector.matchExpressions[0].operator"},
		{"sidecarset orderPriority invalid key", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "not a key"}}}
		}), "spec.updateStrategy.priorityStrategy.orderPriority[0].orderedKey"},
		{"sidecarset scatterStrategy invalid value", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.ScatterStrategy = []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a b"}}
		}), "spec.updateStrategy.scatterStrategy[0].value"},
		{"sidecarset scatterStrategy duplicate term", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.ScatterStrategy = []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}, {Key: "zone", Value: "*"}}
		}), "spec.updateStrategy.scatterStrategy[1]"},
		{"sidecarset HotUpgrade without an empty image", validHotSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].UpgradeStrategy.HotUpgradeEmptyImage = ""
		}), "spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage"},
		{"sidecarset HotUpgrade init container", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "init:1"},
				UpgradeStrategy: &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "e:1"}}}
		}), "spec.initContainers[0].upgradeStrategy.upgradeType"},
		{"sidecarset HotUpgrade in Policy mode", validHotSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
		}), "spec.containers[1].upgradeStrategy.upgradeType"},
		{"sidecarset HotUpgrade slot name taken", validHotSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "mesh-1" }), "spec.containers[1].name"},
		{"sidecarset upgradeType changed to HotUpgrade", validHotSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "e:1"}
		}), "spec.containers[0].upgradeStrategy.upgradeType"},
		{"sidecarset upgradeType changed to ColdUpgrade", validHotSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].UpgradeStrategy.UpgradeType = deckhandv1alpha1.ColdUpgrade
			s.Spec.Containers[1].UpgradeStrategy.HotUpgradeEmptyImage = ""
		}), "spec.containers[1].upgradeStrategy.upgradeType"},
		{"sidecarset hotUpgradeEmptyImage changed", validHotSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].UpgradeStrategy.HotUpgradeEmptyImage = "mesh-empty:2"
		}), "spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage"},
		{"sidecarset HotUpgrade sidecar changed beyond its image", validHotSidecarSet, true, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].Image = "mesh:2"
			s.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
		}), "spec.containers[1]"},
		// patchPodMetadata: the manager here runs with the default, empty
		// --sidecarset-pod-metadata-allowlist, which allows no key.
		{"sidecarset patchPodMetadata key outside the allowlist", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"example.com/team": "x"}}}
		}), "spec.patchPodMetadata[0].annotations[example.com/team]"},
		{"sidecarset patchPodMetadata Deckhand's own key", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"apps.deckhand.dev/sidecarsets": "x"}}}
		}), "spec.patchPodMetadata[0].annotations[apps.deckhand.dev/sidecarsets]"},
		{"sidecarset patchPodMetadata unknown policy", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{PatchPolicy: "Append", Annotations: map[string]string{"example.com/team": "x"}}}
		}), "spec.patchPodMetadata[0].patchPolicy"},
		// --sidecarset-pod-label-allowlist is empty by default too.
		{"sidecarset patchPodMetadata label outside the allowlist", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Labels: map[string]string{"example.com/team": "x"}}}
		}), "spec.patchPodMetadata[0].labels[example.com/team]"},
		{"sidecarset patchPodMetadata entry with neither annotations nor labels", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy}}
		}), "spec.patchPodMetadata[0]"},
		{"sidecarset transferEnv with two sources", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A",
				SourceContainerNameFrom: &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['a']"}}}}
		}), "spec.containers[0].transferEnv[0].sourceContainerNameFrom"},
		{"sidecarset transferEnv with envName and envNames", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A", EnvNames: []string{"B"}}}
		}), "spec.containers[0].transferEnv[0].envNames"},
		{"sidecarset transferEnv unsupported fieldPath", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{EnvName: "A",
				SourceContainerNameFrom: &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		}), "spec.containers[0].transferEnv[0].sourceContainerNameFrom.fieldRef.fieldPath"},
		{"sidecarset shareVolumeDevicePolicy in Policy mode", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
			s.Spec.Containers[0].ShareVolumeDevicePolicy = &deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled}
		}), "spec.injectionMode: Policy does not support spec.containers[0].shareVolumeDevicePolicy"},
		{"sidecarset resourcesPolicy CEL error", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
				Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu *"}}}
		}), "spec.containers[0].resourcesPolicy.resourceExpr.limits.cpu"},
		{"sidecarset resourcesPolicy with fixed resources", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			s.Spec.Containers[0].ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
				Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5"}}}
		}), "spec.containers[0].resources"},
		{"sidecarset resourcesPolicy in Policy mode", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
			s.Spec.Containers[0].ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
				Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5"}}}
		}), "spec.injectionMode: Policy does not support spec.containers[0].resourcesPolicy"},
		{"sidecarset patchPodMetadata in Policy mode", validSidecarSet, false, scs(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
			s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"example.com/team": "x"}}}
		}), "spec.injectionMode: Policy does not support spec.patchPodMetadata"},
	}
}

// TestInvalidObjectsAreRejectedNamingTheField creates every invalid object
// of the table against the real API server (CRD schema, CEL rules and
// Deckhand's webhooks all in place) and checks that each is refused with
// an Invalid error whose message names the offending field.
func TestInvalidObjectsAreRejectedNamingTheField(t *testing.T) {
	ensureDeckhand(t)
	ns := namespace(t)
	cases := invalidCases()
	if len(cases) < 40 {
		t.Fatalf("the table has %d cases; the issue asks for at least 40", len(cases))
	}
	kinds := map[string]int{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Context(t, time.Minute)
			obj := tc.obj(ns)
			kinds[fmt.Sprintf("%T", obj)]++
			if tc.update {
				if err := suite.client.Create(ctx, obj); err != nil {
					t.Fatalf("creating the valid object first: %v", err)
				}
				t.Cleanup(func() { _ = suite.client.Delete(context.Background(), obj) })
				// The controller may write the object meanwhile: mutate the
				// latest version until the answer is not a conflict.
				var err error
				for range 20 {
					if err = suite.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
						t.Fatal(err)
					}
					tc.mutate(obj)
					if err = suite.client.Update(ctx, obj); !apierrors.IsConflict(err) {
						break
					}
				}
				assertNamesField(t, err, tc.field)
				return
			}
			tc.mutate(obj)
			err := suite.client.Create(ctx, obj)
			if err == nil {
				_ = suite.client.Delete(context.Background(), obj)
			}
			assertNamesField(t, err, tc.field)
		})
	}
	figure(t, "%d invalid objects (%v) each rejected by the API server with the field named", len(cases), kinds)
}

func assertNamesField(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want it refused naming %s", field)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Fatalf("refused with %v (reason %s), want Invalid naming %s", err, apierrors.ReasonForError(err), field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("the message does not name %s:\n%v", field, err)
	}
}
