package main

// Setting the cluster up for one variant of item 1: the webhooks, the
// SidecarSets and the injection policies it needs, and nothing else.

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
)

// prepareVariant sets the cluster up for variant v (webhooks, SidecarSets,
// policies) and checks in namespace ns that it injects as v should.
func prepareVariant(ctx context.Context, e *env, k *kruiseManager, null *nullWebhook, v admVariant, ns string) error {
	null.inject.Store(v == admNullInj)
	if err := null.install(ctx, e, v == admNull || v == admNullInj); err != nil {
		return err
	}
	if err := setAdmissionVariant(ctx, e, v); err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	if k != nil {
		if err := setKruiseVariant(ctx, e, v == admKruise); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	if err := admissionNamespace(ctx, e, ns, v); err != nil {
		return err
	}
	if err := probeInjection(ctx, e, ns, v, null); err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	return nil
}

func setAdmissionVariant(ctx context.Context, e *env, v admVariant) error {
	want := map[string]string{}
	mode := deckhandv1alpha1.WebhookInjection
	switch v {
	case admPolicy:
		want[benchMatchSidecarSet] = "bench"
		mode = deckhandv1alpha1.PolicyInjection
	case admOne:
		want[benchMatchSidecarSet] = "bench"
	case admHundred:
		want[benchMatchSidecarSet] = "bench"
		for i := 1; i < 100; i++ {
			want[fmt.Sprintf("bench-other-%02d", i)] = fmt.Sprintf("other-%d", i)
		}
	}
	var list deckhandv1alpha1.SidecarSetList
	if err := e.c.List(ctx, &list); err != nil {
		return err
	}
	have := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		if _, ok := want[s.Name]; !ok {
			if err := e.c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			continue
		}
		have[s.Name] = true
		if s.Spec.InjectionMode != mode {
			s.Spec.InjectionMode = mode
			if err := e.c.Update(ctx, s); err != nil {
				return err
			}
		}
	}
	for name, app := range want {
		if !have[name] {
			s := benchSidecarSet(name, app)
			s.Spec.InjectionMode = mode
			if err := e.c.Create(ctx, s); err != nil {
				return err
			}
		}
	}
	hooks := e.hooks
	if v != admOne && v != admHundred {
		hooks.Serves = func(path string) bool { return path != inject.PodWebhookPath }
	}
	if err := hooks.Install(ctx, e.cs); err != nil {
		return err
	}
	// Let the manager's informers see every SidecarSet before measuring.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var l deckhandv1alpha1.SidecarSetList
		if err := e.c.List(ctx, &l); err != nil {
			return false, nil
		}
		return len(l.Items) == len(want), nil
	}); err != nil {
		return err
	}
	return settlePolicies(ctx, e, v == admPolicy)
}

// settlePolicies does the garbage collector's part for the injection
// policies of deleted SidecarSets (this cluster runs no
// kube-controller-manager: a Policy-mode SidecarSet deleted between
// variants would leave its policy injecting into every later variant's
// pods), then waits until exactly the policy the variant needs exists:
// one in Policy mode, none otherwise.
func settlePolicies(ctx context.Context, e *env, policy bool) error {
	var sets deckhandv1alpha1.SidecarSetList
	if err := e.c.List(ctx, &sets); err != nil {
		return err
	}
	live := map[types.UID]bool{}
	for i := range sets.Items {
		live[sets.Items[i].UID] = true
	}
	orphaned := func(o metav1.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.Kind == "SidecarSet" && !live[ref.UID]
	}
	// Bindings first: a policy without its binding injects nothing.
	for _, list := range []client.ObjectList{&admissionregistrationv1.MutatingAdmissionPolicyBindingList{}, &admissionregistrationv1.MutatingAdmissionPolicyList{}} {
		if err := e.c.List(ctx, list); err != nil {
			return err
		}
		if err := apimeta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(client.Object); orphaned(obj) {
				return client.IgnoreNotFound(e.c.Delete(ctx, obj))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	want := 0
	if policy {
		want = 1
	}
	var have int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var l admissionregistrationv1.MutatingAdmissionPolicyBindingList
		if err := e.c.List(ctx, &l); err != nil {
			return false, nil
		}
		have = len(l.Items)
		return have == want, nil
	})
	if err != nil {
		return fmt.Errorf("%d injection policy bindings, want %d: %w", have, want, err)
	}
	return nil
}
