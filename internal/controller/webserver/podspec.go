package webserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// DefaultDrainSeconds is spec.drainSeconds when it is unset (the CRD
// defaults it; objects built in unit tests may not have it).
const DefaultDrainSeconds = 5

// desiredPodSpec is the pod spec of a WebServer's Deployment: the web server
// container and what the pod around it needs.
func desiredPodSpec(ws *deckhandv1alpha1.WebServer) (*corev1ac.PodSpecApplyConfiguration, error) {
	container, err := desiredContainer(ws)
	if err != nil {
		return nil, err
	}
	sc, err := containerSecurity(ws)
	if err != nil {
		return nil, err
	}
	container.WithSecurityContext(sc)
	readOnlyRoot := sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	if readOnlyRoot {
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName(tmpVolume).WithMountPath("/tmp"))
	}
	configMounts(ws, container)
	// NOTE: WithContainers copies the container: it is complete by now.
	podSpec := corev1ac.PodSpec().WithContainers(container).
		WithAutomountServiceAccountToken(ws.Spec.AutomountServiceAccountToken != nil && *ws.Spec.AutomountServiceAccountToken)
	if readOnlyRoot {
		podSpec.WithVolumes(corev1ac.Volume().WithName(tmpVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	}
	configVolumes(ws, podSpec)
	psc, err := podSecurity(ws)
	if err != nil {
		return nil, err
	}
	podSpec.WithSecurityContext(psc)
	for _, ref := range ws.Spec.ImagePullSecrets {
		podSpec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(ref.Name))
	}
	if ws.Spec.ServiceAccountName != "" {
		podSpec.WithServiceAccountName(ws.Spec.ServiceAccountName)
	}
	if ws.Spec.TerminationGracePeriodSeconds != nil {
		podSpec.WithTerminationGracePeriodSeconds(*ws.Spec.TerminationGracePeriodSeconds)
	}
	return podSpec, nil
}

// desiredContainer is the web server container, without its security
// context.
func desiredContainer(ws *deckhandv1alpha1.WebServer) (*corev1ac.ContainerApplyConfiguration, error) {
	p := port(ws)
	container := corev1ac.Container().
		WithName(deckhandv1alpha1.WebServerContainerName).
		WithImage(ws.Spec.Image).
		WithPorts(corev1ac.ContainerPort().
			WithName(deckhandv1alpha1.WebServerPortName).
			WithContainerPort(p).
			WithProtocol(corev1.ProtocolTCP))
	if len(ws.Spec.Command) > 0 {
		container.WithCommand(ws.Spec.Command...)
	}
	if len(ws.Spec.Args) > 0 {
		container.WithArgs(ws.Spec.Args...)
	}
	for i := range ws.Spec.Env {
		env, err := converted[corev1ac.EnvVarApplyConfiguration](&ws.Spec.Env[i], fmt.Sprintf("spec.env[%d]", i))
		if err != nil {
			return nil, err
		}
		container.WithEnv(env)
	}
	for i := range ws.Spec.EnvFrom {
		from, err := converted[corev1ac.EnvFromSourceApplyConfiguration](&ws.Spec.EnvFrom[i], fmt.Sprintf("spec.envFrom[%d]", i))
		if err != nil {
			return nil, err
		}
		container.WithEnvFrom(from)
	}
	if r := &ws.Spec.Resources; len(r.Limits) > 0 || len(r.Requests) > 0 || len(r.Claims) > 0 {
		res, err := converted[corev1ac.ResourceRequirementsApplyConfiguration](r, "spec.resources")
		if err != nil {
			return nil, err
		}
		container.WithResources(res)
	}
	readiness := corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromInt32(p))).WithPeriodSeconds(10)
	if ws.Spec.ReadinessProbe != nil {
		var err error
		if readiness, err = converted[corev1ac.ProbeApplyConfiguration](ws.Spec.ReadinessProbe, "spec.readinessProbe"); err != nil {
			return nil, err
		}
	}
	container.WithReadinessProbe(readiness)
	if ws.Spec.LivenessProbe != nil {
		probe, err := converted[corev1ac.ProbeApplyConfiguration](ws.Spec.LivenessProbe, "spec.livenessProbe")
		if err != nil {
			return nil, err
		}
		container.WithLivenessProbe(probe)
	}
	if ws.Spec.StartupProbe != nil {
		probe, err := converted[corev1ac.ProbeApplyConfiguration](ws.Spec.StartupProbe, "spec.startupProbe")
		if err != nil {
			return nil, err
		}
		container.WithStartupProbe(probe)
	}
	if drain := drainSeconds(ws); drain > 0 {
		container.WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithSleep(corev1ac.SleepAction().WithSeconds(int64(drain)))))
	}
	return container, nil
}

func drainSeconds(ws *deckhandv1alpha1.WebServer) int32 {
	if ws.Spec.DrainSeconds == nil {
		return DefaultDrainSeconds
	}
	return *ws.Spec.DrainSeconds
}

// converted returns the apply configuration of a core API value, naming
// path in its error.
func converted[T any](v any, path string) (*T, error) {
	out := new(T)
	if err := convert(v, out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// tmpVolume is the writable emptyDir mounted at /tmp when the root
// filesystem is read-only: web servers write temporary files and caches.
const tmpVolume = "tmp"

// containerSecurity is spec.securityContext, or by default a context the
// restricted Pod Security Standard admits: non-root, no privilege
// escalation, no capability, a read-only root filesystem.
func containerSecurity(ws *deckhandv1alpha1.WebServer) (*corev1ac.SecurityContextApplyConfiguration, error) {
	if ws.Spec.SecurityContext != nil {
		return converted[corev1ac.SecurityContextApplyConfiguration](ws.Spec.SecurityContext, "spec.securityContext")
	}
	return corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")), nil
}

// podSecurity is spec.podSecurityContext, or by default runAsNonRoot and
// the RuntimeDefault seccomp profile.
func podSecurity(ws *deckhandv1alpha1.WebServer) (*corev1ac.PodSecurityContextApplyConfiguration, error) {
	if ws.Spec.PodSecurityContext != nil {
		return converted[corev1ac.PodSecurityContextApplyConfiguration](ws.Spec.PodSecurityContext, "spec.podSecurityContext")
	}
	return corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)), nil
}
