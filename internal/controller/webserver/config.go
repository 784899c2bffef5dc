package webserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Config volumes are read, never listed or watched: a WebServer names the
// few it mounts, and a cache of every Secret would hold them all. Secrets
// only where the namespace binds the secret-reader role
// (config/rbac/secret_reader_role.yaml); elsewhere a Secret's changes do
// not roll the pods, and the WebServer says so.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,roleName=manager-webserver-role

// ReasonConfigUnreadable: a ConfigMap or Secret of spec.configVolumes
// could not be read (a Secret where the namespace does not bind the
// secret-reader role); its changes do not roll the pods.
const ReasonConfigUnreadable = "ConfigUnreadable"

// configRecheck is how often a WebServer with config volumes looks at their
// content again: they are not watched.
const configRecheck = 30 * time.Second

// readConfig hashes the content of the ConfigMaps and Secrets the
// WebServer mounts into s.configHash, read straight from the API server. A
// missing one hashes as missing: the pods wait for it, as the kubelet does,
// and roll once it appears.
func (r *Reconciler) readConfig(ctx context.Context, s *scope) (ctrl.Result, error) {
	vols := s.ws.Spec.ConfigVolumes
	if len(vols) == 0 {
		return ctrl.Result{}, nil
	}
	h := sha256.New()
	for _, v := range vols {
		var data map[string][]byte
		obj, kind, name := client.Object(&corev1.ConfigMap{}), "ConfigMap", v.ConfigMap
		if v.Secret != "" {
			obj, kind, name = &corev1.Secret{}, "Secret", v.Secret
		}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.ws.Namespace, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(h, "%s/%s missing\n", kind, name)
			continue
		case apierrors.IsForbidden(err):
			// The kubelet mounts it all the same; only its changes go
			// unnoticed.
			fmt.Fprintf(h, "%s/%s unreadable\n", kind, name)
			r.Recorder.Eventf(s.ws, nil, corev1.EventTypeWarning, ReasonConfigUnreadable, "ReadConfig",
				"%s %s of spec.configVolumes cannot be read, so its changes do not roll the pods: bind the deckhand-secret-reader-role ClusterRole to Deckhand's ServiceAccount in namespace %s", kind, name, s.ws.Namespace)
			continue
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("reading %s %s of spec.configVolumes: %w", kind, name, err)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			data = o.BinaryData
			if data == nil {
				data = map[string][]byte{}
			}
			for k, val := range o.Data {
				data[k] = []byte(val)
			}
		case *corev1.Secret:
			data = o.Data
		}
		fmt.Fprintf(h, "%s/%s %d\n", kind, name, len(data))
		for _, k := range slices.Sorted(maps.Keys(data)) {
			fmt.Fprintf(h, "%q %d %x\n", k, len(data[k]), sha256.Sum256(data[k]))
		}
	}
	s.configHash = hex.EncodeToString(h.Sum(nil)[:8])
	return ctrl.Result{RequeueAfter: configRecheck}, nil
}

// configMounts mounts the config volumes into the container, read-only.
func configMounts(ws *deckhandv1alpha1.WebServer, container *corev1ac.ContainerApplyConfiguration) {
	for _, v := range ws.Spec.ConfigVolumes {
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName(v.Name).WithMountPath(v.MountPath).WithReadOnly(true))
	}
}

// configVolumes adds the config volumes to the pod spec.
func configVolumes(ws *deckhandv1alpha1.WebServer, podSpec *corev1ac.PodSpecApplyConfiguration) {
	for _, v := range ws.Spec.ConfigVolumes {
		vol := corev1ac.Volume().WithName(v.Name)
		if v.Secret != "" {
			vol.WithSecret(corev1ac.SecretVolumeSource().WithSecretName(v.Secret))
		} else {
			vol.WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(v.ConfigMap))
		}
		podSpec.WithVolumes(vol)
	}
}
