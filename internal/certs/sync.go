package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// File names in the certificate directory, as controller-runtime's webhook
// server and the rotator's Secret use them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// addSecretSync keeps dir's tls.crt/tls.key/ca.crt equal to the Secret's.
// It watches only that one Secret (a field selector on its name).
//
// In a pod, a Secret volume would be updated by the kubelet only after its
// sync period (a minute or more) and not at all for a manager running
// outside the cluster; writing the files here makes a rotated certificate
// served within moments by every replica, with an emptyDir as certificate
// directory.
func addSecretSync(mgr ctrl.Manager, key types.NamespacedName, dir string) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{key.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", key.Name),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the certificate Secret cache: %w", err)
	}
	inf, err := c.GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("certs").WithValues("secret", key.String(), "dir", dir)
	write := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != key.Name || s.Namespace != key.Namespace {
			return
		}
		changed, err := WriteFiles(dir, s.Data)
		if err != nil {
			log.Error(err, "writing webhook certificate files")
			return
		}
		if changed {
			log.Info("webhook certificate files updated", "resourceVersion", s.ResourceVersion)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    write,
		UpdateFunc: func(_, obj any) { write(obj) },
	}); err != nil {
		return err
	}
	return mgr.Add(&unelectedCache{Cache: c})
}

// unelectedCache runs on every replica, leader or not.
type unelectedCache struct{ cache.Cache }

func (unelectedCache) NeedLeaderElection() bool { return false }

// WriteFiles writes the certificate, key and CA of data (a kubernetes.io/tls
// style map) into dir when they differ from what is there, each file
// replaced atomically by a rename. It writes nothing while the certificate
// and key are missing or do not form a valid pair, and reports whether it
// wrote anything.
func WriteFiles(dir string, data map[string][]byte) (bool, error) {
	cert, key := data[certFile], data[keyFile]
	if len(cert) == 0 || len(key) == 0 {
		return false, nil
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return false, fmt.Errorf("the Secret's certificate and key do not match: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	changed := false
	// The key goes first: the webhook server reloads on each file event and
	// keeps its previous pair until both files match again.
	for _, f := range []struct {
		name string
		data []byte
	}{{keyFile, key}, {certFile, cert}, {caFile, data[caFile]}} {
		if len(f.data) == 0 {
			continue
		}
		path := filepath.Join(dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.name+"-")
		if err != nil {
			return changed, err
		}
		if _, err := tmp.Write(f.data); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return changed, err
		}
		if err := tmp.Close(); err != nil {
			os.Remove(tmp.Name())
			return changed, err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
