// Command deckhand runs the Deckhand manager: the SidecarSet, PodSet,
// WebServer and RestartSchedule controllers and their admission webhooks.
// This file holds flags and wiring only; behaviour lives in internal/.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/certs"
	"github.com/deckhand-dev/deckhand/internal/metricsauth"
	"github.com/deckhand-dev/deckhand/internal/operator"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/shutdown"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/version"
	"github.com/deckhand-dev/deckhand/internal/webhookserver"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(deckhandv1alpha1.AddToScheme(scheme))
	// WebServers attach to Gateways through HTTPRoutes where the Gateway
	// API is installed.
	utilruntime.Must(gatewayv1.Install(scheme))
}

// options are the manager's command-line settings.
type options struct {
	metricsAddr          string
	secureMetrics        bool
	probeAddr            string
	enableLeaderElection bool
	leaderElectionNS     string
	leaseDuration        time.Duration
	renewDeadline        time.Duration
	retryPeriod          time.Duration
	warmStandby          bool
	webhookHost          string
	webhookPort          int
	webhookCertDir       string
	webhookHTTP2         bool
	metricsHTTP2         bool
	tls                  func(*tls.Config)
	kubeAPIQPS           float64
	kubeAPIBurst         int
	pprofAddr            string
	shutdownDrain        time.Duration
	certs                certs.Options
	operator             operator.Options
}

func main() {
	var o options
	// The manager's own namespace, read once: its Lease's default, and the
	// namespace of SidecarSets' revisions that no SidecarSet reaches.
	own := podutil.OwnNamespace()
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to (\":8443\" serves HTTPS, \"0\" turns metrics off).")
	flag.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS with Kubernetes authentication and authorization. Off only for local debugging.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the healthz/readyz endpoints bind to.")
	flag.BoolVar(&o.enableLeaderElection, "leader-elect", true,
		"Elect a leader so that only one replica reconciles at a time. Every replica serves webhooks.")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", own,
		"Namespace of the leader-election Lease (default: the manager's own namespace, from POD_NAMESPACE or its service account).")
	flag.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second,
		"How long a leader's Lease is valid without renewal: a standby takes over this long after the leader dies, plus up to two retry periods.")
	flag.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew before it gives up leading.")
	// NOTE: a standby sees the Lease expire only when it polls, one retry
	// period apart (with 20% jitter), and measures expiry from when it last
	// saw the Lease change: the worst takeover is the lease duration plus
	// about two retry periods. 1s (controller-runtime's default is 2s) keeps
	// that under the lease duration + 5s, for one Lease read a second per
	// replica.
	flag.DurationVar(&o.retryPeriod, "leader-election-retry-period", time.Second,
		"How often the leader renews its Lease and a standby tries to take it.")
	// NOTE: without it, a replica that wins the Lease first lists every
	// object its controllers watch (every pod, for the PodSet and SidecarSet
	// controllers) and only then reconciles: a fresh manager's caches took
	// 1.3 s to sync at 10,000 pods and 4.7 s at 50,000 (benchmark item 8).
	flag.BoolVar(&o.warmStandby, "leader-election-warm-standby", true,
		"A standby replica starts its controllers' informers and queues before it leads, so that it reconciles as soon as it takes the Lease; it holds the same cache as the leader (its memory was not measured apart). false: informers start on taking the Lease.")
	flag.StringVar(&o.webhookHost, "webhook-host", "", "Address the webhook server binds to (default: all interfaces).")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory holding tls.crt and tls.key for the webhook server; reloaded when they change.")
	// NOTE: over HTTP/1.1 a server cannot close a kept-alive connection
	// without a race: a call the API server sends on it as it closes fails,
	// and admission calls are POSTs, which it does not retry. Over HTTP/2 a
	// stopping replica first sends GOAWAY, and the API server resends the
	// calls it had not yet had answered on a new connection.
	flag.BoolVar(&o.webhookHTTP2, "webhook-http2", true,
		"Offer HTTP/2 on the webhook server, so that a stopping replica tells the API server to take its calls elsewhere (GOAWAY) before it closes its connections. false serves HTTP/1.1 only, where a call racing the close of a kept-alive connection fails.")
	flag.BoolVar(&o.metricsHTTP2, "metrics-http2", false,
		"Offer HTTP/2 on the metrics server (a scrape gains nothing from it).")
	// Kept so that an install which turned HTTP/2 off (or on) with the one
	// flag of earlier releases still starts, and gets what it asked for.
	legacyHTTP2 := flag.Bool("enable-http2", false,
		"Deprecated: sets --webhook-http2 and --metrics-http2 where they are not given.")
	flag.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 0,
		"Client-side rate limit (queries per second) of the whole manager process: one token bucket shared by every client, cache and controller (leader election has a bucket of its own of the same size). 0 keeps controller-runtime's default: no client-side limit, the API server's priority and fairness applies.")
	flag.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0,
		"Burst of that shared bucket when --kube-api-qps is set (default: 1.5 x QPS).")
	// NOTE: a deleted pod's endpoint turns not-ready as soon as the
	// deletion is stored, and every kube-proxy (or the API server routing to
	// endpoints) drops it at its next sync: a second or two, longer on a
	// loaded control plane. 10s covers that with a margin and stays well
	// inside the default terminationGracePeriodSeconds of 30.
	flag.DurationVar(&o.shutdownDrain, "shutdown-drain", 10*time.Second,
		"On SIGTERM, how long the manager keeps serving webhooks after /readyz starts failing, so that endpoints drop it before it stops; it then stops (a second signal stops it at once). Keep terminationGracePeriodSeconds above it.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address to serve net/http/pprof on (for example 127.0.0.1:6060). Empty turns profiling off.")
	o.certs = certs.DefaultOptions()
	flag.StringVar(&o.certs.Mode, "cert-management", o.certs.Mode,
		"Who provides the webhook certificates: \"self\" (Deckhand creates, rotates and injects them) or \"external\" (cert-manager or a mounted Secret fills --webhook-cert-dir and injects the CA).")
	flag.StringVar(&o.certs.SecretName, "cert-secret-name", o.certs.SecretName,
		"Secret holding the CA and the serving certificate (self mode).")
	flag.StringVar(&o.certs.SecretNamespace, "cert-secret-namespace", "",
		"Namespace of that Secret (default: the manager's own namespace, from POD_NAMESPACE or its service account).")
	flag.StringVar(&o.certs.ServiceName, "webhook-service-name", o.certs.ServiceName,
		"Webhook Service; the serving certificate is issued for <name>.<namespace>.svc (self mode).")
	flag.StringVar(&o.certs.MetricsServiceName, "metrics-service-name", o.certs.MetricsServiceName,
		"Metrics Service; the serving certificate, which the metrics endpoint serves too, is also issued for <name>.<namespace>.svc (self mode).")
	extraDNS := flag.String("cert-extra-dns-names", "",
		"Comma-separated extra DNS names for the serving certificate, e.g. \"localhost\" for a manager run outside the cluster (self mode).")
	mutating := flag.String("mutating-webhook-configurations", strings.Join(o.certs.MutatingWebhookConfigurations, ","),
		"Comma-separated MutatingWebhookConfigurations the CA bundle is injected into (self mode).")
	validating := flag.String("validating-webhook-configurations", strings.Join(o.certs.ValidatingWebhookConfigurations, ","),
		"Comma-separated ValidatingWebhookConfigurations the CA bundle is injected into (self mode).")
	flag.DurationVar(&o.certs.CAValidity, "cert-ca-validity", o.certs.CAValidity, "Lifetime of a new CA certificate (self mode).")
	flag.DurationVar(&o.certs.CertValidity, "cert-validity", o.certs.CertValidity, "Lifetime of a new serving certificate (self mode).")
	flag.DurationVar(&o.certs.RotationLookahead, "cert-rotation-lookahead", o.certs.RotationLookahead,
		"Renew a certificate once it would be expired this long from now (self mode).")
	flag.DurationVar(&o.certs.RotationCheckInterval, "cert-rotation-check-interval", o.certs.RotationCheckInterval,
		"How often the certificates' validity is checked (self mode).")
	o.operator = operator.DefaultOptions()
	o.operator.Namespace = own
	flag.StringVar(&o.operator.DefaultRestartSchedule, "default-restart-schedule", o.operator.DefaultRestartSchedule,
		"Schedule of a RestartSchedule generated for a workload annotated apps.deckhand.dev/restart-schedule=\"true\".")
	injectionMode := flag.String("sidecarset-injection-mode", string(o.operator.SidecarSetInjectionMode),
		"Injection mode of SidecarSets that leave spec.injectionMode unset: Webhook (Deckhand's pod webhook) or Policy (a MutatingAdmissionPolicy the API server applies; needs Kubernetes 1.36, falls back to the webhook where it is not served).")
	flag.BoolVar(&o.operator.SidecarSetPodWebhook, "sidecarset-pod-webhook", o.operator.SidecarSetPodWebhook,
		"Serve the pod injection webhook. false takes Deckhand off the pod create path (the webhook must then be left out of the MutatingWebhookConfiguration too): every SidecarSet must be in Policy mode, so it needs --sidecarset-injection-mode=Policy and Kubernetes 1.36.")
	flag.BoolVar(&o.operator.SidecarSetPolicyInjection, "sidecarset-policy-injection", o.operator.SidecarSetPolicyInjection,
		"Inject SidecarSets in Policy mode through the MutatingAdmissionPolicies Deckhand writes (needs the policy-injection role: config/components/policy-injection). false (the default, unless --sidecarset-injection-mode=Policy): the pod webhook injects every SidecarSet and Deckhand needs no permission on MutatingAdmissionPolicies.")
	flag.DurationVar(&o.operator.RestartScheduleMinInterval, "restart-schedule-min-interval", o.operator.RestartScheduleMinInterval,
		"Shortest time allowed between two runs of a RestartSchedule, from 1s to 1m: a schedule that fires more often (\"@every 10s\") is refused at admission.")
	maxReplicas := flag.Int("max-podset-replicas", int(o.operator.MaxPodSetReplicas),
		"Most pods a PodSet may ask for: spec.replicas, or a write to its scale subresource, above it is refused at admission.")
	protectedNamespaces := flag.String("protected-namespaces", strings.Join(sidecarcontrol.DefaultProtectedNamespaces(own), ","),
		"Comma-separated namespaces whose pods no SidecarSet injects or updates. kube-system and the manager's own namespace are protected whatever this says (the pod webhook's configuration leaves them out).")
	metadataAllowlist := flag.String("sidecarset-pod-metadata-allowlist", "",
		"Comma-separated pod annotation keys, or glob patterns such as example.com/*, that SidecarSets may set on the pods they inject (spec.patchPodMetadata). Empty (the default) allows none; keys under apps.deckhand.dev/ never are.")
	labelAllowlist := flag.String("sidecarset-pod-label-allowlist", "",
		"Comma-separated pod label keys, or glob patterns such as example.com/*, that SidecarSets may set on the pods they inject (spec.patchPodMetadata[].labels). Separate from --sidecarset-pod-metadata-allowlist because a label decides which Services, PodDisruptionBudgets, NetworkPolicies, controllers and SidecarSets select a pod: allowing an annotation prefix must not allow its labels. Empty (the default) allows none; keys under apps.deckhand.dev/ never are.")
	tlsMinVersion := flag.String("tls-min-version", "VersionTLS12",
		"Lowest TLS version the webhook and metrics servers accept: VersionTLS12 or VersionTLS13.")
	tlsCipherSuites := flag.String("tls-cipher-suites", "",
		"Comma-separated TLS 1.2 cipher suites the webhook and metrics servers accept, by Go name (e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); insecure suites are refused. Empty keeps Go's defaults.")
	controllers := flag.String("controllers", "all",
		"Comma-separated kinds the manager runs: sidecarset, podset, webserver, restartschedule, or all (\"*\"). A kind left out has no controller, no webhook (its webhook paths refuse its objects) and no informer; the pod webhook and the pod informer come with sidecarset (and podset, which owns pods).")
	printVersion := flag.Bool("version", false, "Print the version and exit.")
	// --zap-time-encoding still overrides logTimeEncoder.
	zapOpts := zap.Options{Development: false, TimeEncoder: logTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["enable-http2"] {
		fmt.Fprintln(os.Stderr, "--enable-http2 is deprecated: use --webhook-http2 and --metrics-http2")
	}
	o.webhookHTTP2, o.metricsHTTP2 = resolveHTTP2(given, *legacyHTTP2, o.webhookHTTP2, o.metricsHTTP2)
	var err error
	if o.tls, err = webhookserver.TLSConfig(*tlsMinVersion, splitList(*tlsCipherSuites)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.operator.Controllers, err = operator.ParseControllers(*controllers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o.operator.SidecarSetInjectionMode = deckhandv1alpha1.InjectionMode(*injectionMode)
	o.operator.SidecarSetPodMetadataAllowlist = splitList(*metadataAllowlist)
	o.operator.SidecarSetPodLabelAllowlist = splitList(*labelAllowlist)
	o.operator.ProtectedNamespaces = append([]string{}, splitList(*protectedNamespaces)...)
	o.operator.MaxPodSetReplicas = int32(min(max(*maxReplicas, -1), math.MaxInt32))
	build := version.Get()
	if *printVersion {
		fmt.Println(build)
		return
	}
	o.certs.CertDir = o.webhookCertDir
	o.certs.ExtraDNSNames = splitList(*extraDNS)
	o.certs.MutatingWebhookConfigurations = splitList(*mutating)
	o.certs.ValidatingWebhookConfigurations = splitList(*validating)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setupLog.Info("deckhand", "version", build.Version, "revision", build.Revision, "goVersion", build.GoVersion)
	ctrlmetrics.Registry.MustRegister(version.Collector(build))

	if err := run(o); err != nil {
		setupLog.Error(err, "manager exited with an error")
		os.Exit(1)
	}
}

// resolveHTTP2 applies the deprecated --enable-http2 (legacy) to the
// webhook and metrics servers whose own flag was not given.
func resolveHTTP2(given map[string]bool, legacy, webhook, metrics bool) (bool, bool) {
	if !given["enable-http2"] {
		return webhook, metrics
	}
	if !given["webhook-http2"] {
		webhook = legacy
	}
	if !given["metrics-http2"] {
		metrics = legacy
	}
	return webhook, metrics
}

func run(o options) error {
	http1Only := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	webhookTLS := []func(*tls.Config){o.tls}
	if !o.webhookHTTP2 {
		webhookTLS = append(webhookTLS, http1Only)
	}
	metricsTLS := []func(*tls.Config){o.tls}
	if !o.metricsHTTP2 {
		metricsTLS = append(metricsTLS, http1Only)
	}

	// The metrics endpoint serves the webhook's certificate, so that a
	// scraper verifies it against the CA of the certificate Secret.
	serving := certs.NewFileCertificate(o.webhookCertDir)
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		TLSOpts: append(metricsTLS, func(c *tls.Config) {
			c.GetCertificate = serving.GetCertificate
		}),
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = metricsauth.NewFilter
	}

	cfg := ctrl.GetConfigOrDie()
	leaderElectionCfg := limitClients(cfg, o.kubeAPIQPS, o.kubeAPIBurst)
	hooks := webhookserver.New(webhook.Options{
		Host:    o.webhookHost,
		Port:    o.webhookPort,
		CertDir: o.webhookCertDir,
		TLSOpts: webhookTLS,
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		PprofBindAddress:              o.pprofAddr,
		Metrics:                       metricsOpts,
		WebhookServer:                 hooks,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.enableLeaderElection,
		LeaderElectionID:              "deckhand.apps.deckhand.dev",
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		LeaderElectionConfig:          leaderElectionCfg,
		Cache:                         operator.CacheOptions(),
		Controller:                    config.Controller{EnableWarmup: &o.warmStandby},
	})
	if err != nil {
		return err
	}

	// Controllers and webhooks are registered only once the webhook
	// certificates exist (self mode: created and injected by the rotator),
	// so the webhook server never starts without a certificate.
	certsReady, err := certs.Setup(mgr, o.certs)
	if err != nil {
		return err
	}
	gate := certs.NewGate(certsReady, func() error { return operator.Setup(mgr, o.operator) })
	if err := mgr.Add(gate); err != nil {
		return err
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready only once the certificates exist and the webhook server is
	// serving, so that a Service never routes admission requests to a
	// replica that cannot answer them.
	if err := mgr.AddReadyzCheck("webhook", gate.Checker(func() healthz.Checker {
		return mgr.GetWebhookServer().StartedChecker()
	})); err != nil {
		return err
	}

	// A planned stop drains first: unready, still serving, then stopped.
	drain := shutdown.New(o.shutdownDrain, hooks.Drain)
	if err := mgr.AddReadyzCheck("shutdown", drain.Checker); err != nil {
		return err
	}

	setupLog.Info("starting manager")
	return mgr.Start(drain.SignalContext(setupLog))
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// logTimeEncoder stamps log lines in UTC to the millisecond: a failover, a
// drain or a webhook stall lasts seconds, and whole-second stamps cannot
// order the steps inside one.
func logTimeEncoder(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}
