package webserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// configHash is the config hash of a Deployment's pod template.
func configHash(d *appsv1.Deployment) string {
	return d.Spec.Template.Annotations[deckhandv1alpha1.WebServerConfigHashAnnotation]
}

// A WebServer mounts a ConfigMap and a Secret read-only; a change of the
// ConfigMap's content rolls the pods (the template's config hash changes),
// and a ConfigMap that appears late does too.
func TestConfigVolumesRollOnChange(t *testing.T) {
	ns := env.Namespace(t)
	env.BindSecretReader(ctx(t), t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-config"}, Data: map[string]string{"site.conf": "v1"}}
	testutil.Create(ctx(t), t, env.Client, cm)
	ws := newWebServer(ns, "site", ptr.To[int32](1))
	ws.Spec.ConfigVolumes = []deckhandv1alpha1.WebServerConfigVolume{
		{Name: "config", MountPath: "/etc/site", ConfigMap: "site-config"},
		{Name: "certs", MountPath: "/etc/certs", Secret: "site-certs"},
	}
	testutil.Create(ctx(t), t, env.Client, ws)

	d := waitDeployment(t, ns, "site", "the config volumes and a config hash", func(d *appsv1.Deployment) bool { return configHash(d) != "" })
	spec := d.Spec.Template.Spec
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["config"]; m.MountPath != "/etc/site" || !m.ReadOnly {
		t.Errorf("config mount %+v", m)
	}
	if m := mounts["certs"]; m.MountPath != "/etc/certs" || !m.ReadOnly {
		t.Errorf("certs mount %+v", m)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	if vols["config"].ConfigMap == nil || vols["config"].ConfigMap.Name != "site-config" || vols["certs"].Secret == nil || vols["certs"].Secret.SecretName != "site-certs" {
		t.Errorf("volumes %+v", spec.Volumes)
	}
	first := configHash(d)

	// The Secret appears: the hash changes.
	testutil.Create(ctx(t), t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-certs"}, Data: map[string][]byte{"tls.crt": []byte("x")}})
	d = waitDeployment(t, ns, "site", "a new config hash once the Secret exists", func(d *appsv1.Deployment) bool { return configHash(d) != first })
	second := configHash(d)

	// The ConfigMap's content changes: the hash changes again, and the
	// Deployment rolls a new ReplicaSet.
	cm.Data["site.conf"] = "v2"
	if err := env.Client.Update(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitDeployment(t, ns, "site", "a new config hash once the ConfigMap changed", func(d *appsv1.Deployment) bool {
		return configHash(d) != second && configHash(d) != first
	})
	t.Logf("the ConfigMap change reached the pod template in %s", time.Since(start).Round(time.Second))

	// Where the namespace does not let Deckhand read its Secrets, the
	// Secret is mounted all the same and a Warning says its changes do not
	// roll the pods.
	closed := env.Namespace(t)
	env.ExpectRefused("/api/v1/namespaces/" + closed + "/secrets/")
	locked := newWebServer(closed, "site", ptr.To[int32](1))
	locked.Spec.ConfigVolumes = []deckhandv1alpha1.WebServerConfigVolume{{Name: "certs", MountPath: "/etc/certs", Secret: "site-certs"}}
	testutil.Create(ctx(t), t, env.Client, locked)
	waitDeployment(t, closed, "site", "a config hash", func(d *appsv1.Deployment) bool { return configHash(d) != "" })
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, closed, "site", webserver.ReasonConfigUnreadable)
		return len(evs) > 0, err
	}, "a ConfigUnreadable Event")

	// What the schema refuses.
	for field, vol := range map[string]deckhandv1alpha1.WebServerConfigVolume{
		"spec.configVolumes[0].name":      {Name: "tmp", MountPath: "/etc/x", ConfigMap: "a"},
		"spec.configVolumes[0].mountPath": {Name: "x", MountPath: "etc/x", ConfigMap: "a"},
		"spec.configVolumes[0]":           {Name: "x", MountPath: "/etc/x", ConfigMap: "a", Secret: "b"},
	} {
		w := newWebServer(ns, "bad", nil)
		w.Spec.ConfigVolumes = []deckhandv1alpha1.WebServerConfigVolume{vol}
		if err := env.Client.Create(ctx(t), w); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want a refusal naming it", field, err)
		}
	}
}
