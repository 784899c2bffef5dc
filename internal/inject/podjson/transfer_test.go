package podjson

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestTransferEnvKeepsTheSidecarsOwnValue pins the precedence of
// transferEnv, OpenKruise's MergeEnvVar(own, transferred): the sidecar's
// own variable keeps its value, a transferred one is appended after the
// sidecar's own in transfer order, and of two transfers of one name the
// first wins.
func TestTransferEnvKeepsTheSidecarsOwnValue(t *testing.T) {
	pod := `{"metadata":{"labels":{"main":"server"},"annotations":{"main":"helper"}},"spec":{
		"initContainers":[{"name":"init-app","env":[{"name":"FROM_INIT","value":"init"}]}],
		"containers":[
			{"name":"server","env":[{"name":"OD_NAME","value":"app"},{"name":"ZONE","value":"a"},{"name":"FROM_INIT","value":"server"}]},
			{"name":"helper","env":[{"name":"ZONE","value":"b"},{"name":"MODE","value":"fast"}]}]}}`
	from := func(fp string) *deckhandv1alpha1.SourceContainerNameSource {
		return &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fp}}
	}
	cases := map[string]struct {
		own       []corev1.EnvVar
		transfers []deckhandv1alpha1.TransferEnvVar
		want      string
	}{
		"own value kept": {
			own:       []corev1.EnvVar{{Name: "OD_NAME", Value: "sidecar"}},
			transfers: []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "server", EnvName: "OD_NAME"}},
			want:      "OD_NAME=sidecar",
		},
		"own value kept with envNames and a label source": {
			own: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "OD_NAME", Value: "sidecar"}},
			transfers: []deckhandv1alpha1.TransferEnvVar{{SourceContainerNameFrom: from("metadata.labels['main']"),
				EnvNames: []string{"OD_NAME", "ZONE", "ABSENT"}}},
			want: "A=1,OD_NAME=sidecar,ZONE=a",
		},
		"an annotation source": {
			transfers: []deckhandv1alpha1.TransferEnvVar{{SourceContainerNameFrom: from("metadata.annotations['main']"), EnvName: "MODE"}},
			want:      "MODE=fast",
		},
		"appended when the sidecar has none": {
			own:       []corev1.EnvVar{{Name: "A", Value: "1"}},
			transfers: []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "server", EnvName: "OD_NAME"}},
			want:      "A=1,OD_NAME=app",
		},
		"first transfer of a name wins": {
			transfers: []deckhandv1alpha1.TransferEnvVar{
				{SourceContainerName: "helper", EnvName: "ZONE"},
				{SourceContainerName: "server", EnvName: "ZONE"},
				{SourceContainerName: "init-app", EnvName: "FROM_INIT"},
				{SourceContainerName: "server", EnvName: "FROM_INIT"},
			},
			want: "ZONE=b,FROM_INIT=init",
		},
		"a source without the variable or absent transfers nothing": {
			own: []corev1.EnvVar{{Name: "A", Value: "1"}},
			transfers: []deckhandv1alpha1.TransferEnvVar{
				{SourceContainerName: "helper", EnvName: "OD_NAME"},
				{SourceContainerName: "nobody", EnvName: "MODE"},
				{SourceContainerNameFrom: from("metadata.labels['other']"), EnvName: "MODE"},
			},
			want: "A=1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var p RawPod
			if err := DecodePod([]byte(pod), &p); err != nil {
				t.Fatal(err)
			}
			sc := deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent", Image: "agent:1", Env: tc.own}, TransferEnv: tc.transfers}
			frag := encodeContainer(&sc)
			a := &appContainers{pod: &p}
			got, err := a.transferEnv(sc.TransferEnv, frag.env)
			if err != nil {
				t.Fatal(err)
			}
			var vars []string
			for _, e := range got {
				var v corev1.EnvVar
				if err := json.Unmarshal(e.raw, &v); err != nil {
					t.Fatalf("element %s: %v", e.raw, err)
				}
				vars = append(vars, v.Name+"="+v.Value)
			}
			if s := strings.Join(vars, ","); s != tc.want {
				t.Errorf("env %s, want %s", s, tc.want)
			}
		})
	}
}
