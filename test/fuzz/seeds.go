package fuzz

// InjectionSeedPods are the pod bodies FuzzSidecarInjection starts from,
// well-formed or not. The differential test of the Policy injection mode
// (internal/controller/sidecarpolicy) runs the well-formed ones through
// both injection modes.
var InjectionSeedPods = []string{
	`{"metadata":{"name":"web-0","namespace":"fz","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx","env":[{"name":"TZ","value":"UTC"}],"volumeMounts":[{"name":"data","mountPath":"/data"}]}],"volumes":[{"name":"data","emptyDir":{}}]}}`,
	`{"metadata":{"generateName":"web-","labels":{"app":"web"},"annotations":{"a/b~c":"x"}},"spec":{"initContainers":[{"name":"init","image":"busybox"}],"containers":[{"name":"app","image":"nginx","securityContext":{"runAsUser":1000}}],"imagePullSecrets":[{"name":"regcred"}],"securityContext":{"runAsNonRoot":true},"hostNetwork":false}}`,
	`{"metadata":{"name":"skip","labels":{"app":"web"},"annotations":{"apps.deckhand.dev/sidecarset-skip-injection":"true"}},"spec":{"containers":[{"name":"app","image":"x"}]}}`,
	`{"metadata":{"name":"already","labels":{"app":"web"}},"spec":{"containers":[{"name":"log","image":"other"},{"name":"app","image":"x"}]}}`,
	`{"metadata":{"name":"empty","labels":{"app":"web"}},"spec":{}}`,
	`{"metadata":{"name":"nulls","labels":{"app":"web"},"annotations":null},"spec":{"containers":null,"volumes":null,"initContainers":null}}`,
	`{"metadata":{"name":"u","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"x","env":[{"name":"\u00e9\"\\","value":"\ud83d\ude00"}]}]},"unknownField":{"keep":[1,2,{"x":null}]}}`,
	`{"metadata":{"name":"other","labels":{"app":"db"}},"spec":{"containers":[{"name":"app","image":"x"}]}}`,
	`{"spec":{"containers":[{"name":"app"`,
	`[]`,
	`{"metadata":"x"}`,
}

// InjectionSeedSidecarSets are the SidecarSets FuzzSidecarInjection pairs
// with the seed pods, in the namespace "fz" (labelled env=fuzz).
var InjectionSeedSidecarSets = []string{
	`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","shareVolumePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerName":"app","envName":"TZ"}],"securityContext":{"runAsUser":65534,"readOnlyRootFilesystem":true}}],"volumes":[{"name":"logs","emptyDir":{}}],"imagePullSecrets":[{"name":"logcred"}]}}`,
	`{"metadata":{"name":"mesh"},"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"Exists"}]},"namespaceSelector":{"matchLabels":{"env":"fuzz"}},"initContainers":[{"name":"proxy-init","image":"mesh/init:1","securityContext":{"capabilities":{"add":["NET_ADMIN"]}}},{"name":"proxy","image":"mesh/proxy:1","restartPolicy":"Always","podInjectPolicy":"AfterAppContainer"}],"containers":[{"name":"after","image":"x:1","podInjectPolicy":"AfterAppContainer"}]}}`,
	`{"metadata":{"name":"scoped"},"spec":{"namespace":"fz","selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}`,
}
