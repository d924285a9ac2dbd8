package kubernetes

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/patchflow/patchflow/internal/listener"
)

// typeMeta is what every document says it is.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// decodeStrict decodes one document into the Go type of its apiVersion and
// kind, refusing any field the type lacks (a misspelt one).
func decodeStrict(doc []byte) (any, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "networking.k8s.io/v1 NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	case "keda.sh/v1alpha1 ScaledObject":
		obj = &kedav1alpha1.ScaledObject{}
	case "keda.sh/v1alpha1 TriggerAuthentication":
		obj = &kedav1alpha1.TriggerAuthentication{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		obj = &kusttypes.Kustomization{}
	default:
		return nil, fmt.Errorf("no Go type known for %s %s", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// documents splits a multi-document YAML stream.
func documents(b []byte) [][]byte {
	var out [][]byte
	for d := range bytes.SplitSeq(b, []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// Every YAML file under base/ and overlays/ decodes strictly; the
// example overlay's patch of the ConfigMap (a partial object) too.
func TestEveryManifestDecodesStrictly(t *testing.T) {
	files, err := filepath.Glob("*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("overlays/*/*.yaml")
	files = append(files, more...)
	if len(files) < 8 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range documents(b) {
			if _, err := decodeStrict(d); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

// The strict decoding refuses a misspelt field: the check can fail.
func TestAMisspeltFieldIsRefused(t *testing.T) {
	b, err := os.ReadFile("base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte("terminationGracePeriodSeconds: "), []byte("terminationGracePeriodSecond: "), 1)
	if _, err := decodeStrict(bad); err == nil {
		t.Fatal("a Deployment with terminationGracePeriodSecond decoded")
	}
	b, _ = os.ReadFile("base/scaledobject.yaml")
	bad = bytes.Replace(b, []byte("maxReplicaCount: "), []byte("maxReplicas: "), 1)
	if _, err := decodeStrict(bad); err == nil {
		t.Fatal("a ScaledObject with maxReplicas decoded")
	}
}

// render builds dir with kustomize's Go API and decodes every object
// strictly.
func render(t *testing.T, dir string) []any {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	for _, d := range documents(out) {
		obj, err := decodeStrict(d)
		if err != nil {
			t.Fatalf("rendered %s: %v", dir, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func find[T any](objs []any) T {
	for _, o := range objs {
		if v, ok := o.(T); ok {
			return v
		}
	}
	var zero T
	return zero
}

// partitions is the example topic's partition count, which the overlay's
// ScaledObject may not exceed (a member beyond it holds no partition).
const partitions = 16

// The overlay renders, and what it renders fits the listener: every
// variable the Deployment sets is a listener setting with a value Parse
// accepts; the probes ask its endpoints on its port; the grace period
// covers the drain; the autoscaler stops at the partition count.
func TestTheOverlayRendersAListenerThatFits(t *testing.T) {
	for _, dir := range []string{"base", "overlays/example"} {
		render(t, dir)
	}
	objs := render(t, "overlays/example")
	dep := find[*appsv1.Deployment](objs)
	cm := find[*corev1.ConfigMap](objs)
	so := find[*kedav1alpha1.ScaledObject](objs)
	if find[*corev1.Secret](objs) != nil {
		t.Fatal("the overlay renders a Secret: applying it would overwrite the real one")
	}
	sec := exampleSecret(t)
	if dep == nil || cm == nil || so == nil || find[*monitoringv1.ServiceMonitor](objs) == nil ||
		find[*policyv1.PodDisruptionBudget](objs) == nil || find[*corev1.Service](objs) == nil {
		t.Fatalf("the overlay lacks an object: %T", objs)
	}
	env := environment(t, dep, cm, sec)
	if err := checkSettings(env); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	_, port, err := net.SplitHostPort(env["LISTENER_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("LISTENER_HTTP_ADDR %q: %v", env["LISTENER_HTTP_ADDR"], err)
	}
	if len(c.Ports) != 1 || fmt.Sprint(c.Ports[0].ContainerPort) != port {
		t.Fatalf("container ports %v, want the listener's %s", c.Ports, port)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("no %s probe over HTTP", name)
		}
		if !slices.Contains([]string{"/healthz", "/readyz"}, p.HTTPGet.Path) || (p.HTTPGet.Port.String() != c.Ports[0].Name && p.HTTPGet.Port.String() != port) {
			t.Errorf("%s probe asks %s on %s: not the listener's", name, p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness asks %s and liveness %s", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	drain, err := time.ParseDuration(env["LISTENER_DRAIN_TIMEOUT"])
	if err != nil {
		t.Fatalf("LISTENER_DRAIN_TIMEOUT: %v", err)
	}
	// The drain, then the commit, the leave and the exit: 5 s of margin at
	// least (measured: under 2 s).
	if g := time.Duration(*dep.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; g < drain+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v, want at least the drain %v + 5 s", g, drain)
	}
	if so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount > partitions {
		t.Errorf("the ScaledObject scales to %v, more than the %d partitions", so.Spec.MaxReplicaCount, partitions)
	}
	if so.Spec.ScaleTargetRef == nil || so.Spec.ScaleTargetRef.Name != dep.Name {
		t.Errorf("the ScaledObject scales %v, not the Deployment %s", so.Spec.ScaleTargetRef, dep.Name)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot == nil ||
		!*dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("the listener's container is not locked down: %+v", sc)
	}
}

// exampleSecret is the Secret's keys as overlays/example shows them.
func exampleSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	b, err := os.ReadFile("overlays/example/secret.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Secret)
}

// environment is what the Deployment's container gets: the ConfigMap's
// data (envFrom) and the Secret's keys it names.
func environment(t *testing.T, dep *appsv1.Deployment, cm *corev1.ConfigMap, sec *corev1.Secret) map[string]string {
	t.Helper()
	env := map[string]string{}
	c := dep.Spec.Template.Spec.Containers[0]
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.ConfigMapRef.Name != cm.Name {
			t.Fatalf("envFrom %+v: not the ConfigMap %s", from, cm.Name)
		}
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := sec.StringData[ref.Key]
			if ref.Name != sec.Name || !ok {
				t.Fatalf("%s comes from %s/%s, which the Secret lacks", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			// What the kubelet passes: the container's resource, in bytes
			// for memory (the default divisor, 1).
			ref := e.ValueFrom.ResourceFieldRef
			if ref.ContainerName != c.Name || ref.Resource != "limits.memory" {
				t.Fatalf("%s comes from %s of container %q, not limits.memory of %q", e.Name, ref.Resource, ref.ContainerName, c.Name)
			}
			q, ok := c.Resources.Limits[corev1.ResourceMemory]
			if !ok {
				t.Fatalf("%s comes from limits.memory, which the container does not set", e.Name)
			}
			env[e.Name] = strconv.FormatInt(q.Value(), 10)
		default:
			env[e.Name] = e.Value
		}
	}
	return env
}

// checkSettings says whether env holds only settings the listener reads,
// each with a value it accepts.
func checkSettings(env map[string]string) error {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	_, set, err := listener.Parse(nil, lookup)
	if err != nil {
		return fmt.Errorf("the listener refuses the manifests' settings: %w", err)
	}
	known := set.Envs()
	var unknown []string
	for k := range env {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("the manifests set variables the listener does not read: %s", strings.Join(unknown, ", "))
	}
	return nil
}

// The settings check can fail: a misspelt name, a bad value.
func TestTheSettingsCheckCatchesMistakes(t *testing.T) {
	objs := render(t, "overlays/example")
	env := environment(t, find[*appsv1.Deployment](objs), find[*corev1.ConfigMap](objs), exampleSecret(t))
	if err := checkSettings(env); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(map[string]string){
		"misspelt": func(e map[string]string) {
			e["LISTENER_DRAIN_TIMOUT"] = e["LISTENER_DRAIN_TIMEOUT"]
			delete(e, "LISTENER_DRAIN_TIMEOUT")
		},
		"bad value": func(e map[string]string) { e["DB_MAX_OPEN_CONNS"] = "sixteen" },
		"renamed":   func(e map[string]string) { e["KAFKA_BOOTSTRAP"] = e["KAFKA_BROKERS"] },
	} {
		e := make(map[string]string, len(env))
		for k, v := range env {
			e[k] = v
		}
		mutate(e)
		if err := checkSettings(e); err == nil {
			t.Errorf("%s: the check passed", name)
		}
	}
}

// scraper is a pod that scrapes the listener's metrics: its labels and its
// namespace's.
type scraper struct {
	namespace, pod map[string]string
}

// scrapers are the metrics scrapers each directory's NetworkPolicy is to
// admit: the base's default, the example overlay's own (patched in).
var scrapers = map[string]scraper{
	"base": {namespace: map[string]string{"kubernetes.io/metadata.name": "monitoring"},
		pod: map[string]string{"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}},
	"overlays/example": {namespace: map[string]string{"kubernetes.io/metadata.name": "openshift-user-workload-monitoring"},
		pod: map[string]string{"app.kubernetes.io/name": "prometheus", "prometheus": "user-workload"}},
}

// admits says whether np lets a pod with podLabels, in a namespace with
// nsLabels other than np's own (ownNamespace false) or np's own, reach
// port on the pods np selects. It reads np as Kubernetes does for what the
// manifests use: peers with a namespace and a pod selector (an absent
// namespace selector: np's namespace; an absent pod selector: every pod),
// named or numbered ports.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, nsLabels, podLabels map[string]string, ownNamespace bool, port corev1.ContainerPort) bool {
	t.Helper()
	matches := func(sel *metav1.LabelSelector, set map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("NetworkPolicy selector %v: %v", sel, err)
		}
		return s.Matches(labels.Set(set))
	}
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() == port.Name || p.Port.IntValue() == int(port.ContainerPort) {
				portOK = portOK || p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP
			}
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true // from anywhere
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				return true // some addresses: taken as any pod's
			}
			nsOK := ownNamespace
			if peer.NamespaceSelector != nil {
				nsOK = matches(peer.NamespaceSelector, nsLabels)
			}
			podOK := peer.PodSelector == nil || matches(peer.PodSelector, podLabels)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// The HTTP port admits the metrics scraper only: the NetworkPolicy selects
// the listener's pods, restricts their ingress, and on the metrics port
// lets in the configured scraper's pods and neither another pod of its
// namespace, nor a pod labelled as the scraper in another namespace (the
// listener's own included), nor anything on another port. The kubelet's
// probes need no rule: traffic from the pod's own node is never filtered.
func TestTheNetworkPolicyAdmitsOnlyTheScraper(t *testing.T) {
	for dir, want := range scrapers {
		objs := render(t, dir)
		np := find[*networkingv1.NetworkPolicy](objs)
		dep := find[*appsv1.Deployment](objs)
		if np == nil || dep == nil {
			t.Fatalf("%s renders no NetworkPolicy beside its Deployment: any pod in the cluster reaches the listener's port", dir)
		}
		if np.Namespace != dep.Namespace {
			t.Errorf("%s: the NetworkPolicy is in namespace %q, the Deployment in %q", dir, np.Namespace, dep.Namespace)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("%s: the NetworkPolicy's pod selector %v does not select the listener's pods %v", dir, np.Spec.PodSelector, dep.Spec.Template.Labels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: policy types %v, want Ingress alone (egress reaches Kafka, PostgreSQL, VMaaS and DNS)", dir, np.Spec.PolicyTypes)
		}
		metrics := dep.Spec.Template.Spec.Containers[0].Ports[0]
		other := corev1.ContainerPort{Name: "other", ContainerPort: 8080}
		if !admits(t, np, want.namespace, want.pod, false, metrics) {
			t.Errorf("%s: the scraper (%v in %v) is refused the metrics port", dir, want.pod, want.namespace)
		}
		refused := map[string]func() bool{
			"another pod of the scraper's namespace": func() bool {
				return admits(t, np, want.namespace, map[string]string{"app.kubernetes.io/name": "grafana"}, false, metrics)
			},
			"a pod labelled as the scraper in another namespace": func() bool {
				return admits(t, np, map[string]string{"kubernetes.io/metadata.name": "tenant"}, want.pod, false, metrics)
			},
			"a pod labelled as the scraper in the listener's namespace": func() bool {
				return admits(t, np, map[string]string{"kubernetes.io/metadata.name": dep.Namespace}, want.pod, true, metrics)
			},
			"another listener pod": func() bool {
				return admits(t, np, map[string]string{"kubernetes.io/metadata.name": dep.Namespace}, dep.Spec.Template.Labels, true, metrics)
			},
			"the scraper on another port": func() bool { return admits(t, np, want.namespace, want.pod, false, other) },
		}
		for who, admitted := range refused {
			if admitted() {
				t.Errorf("%s: %s reaches the listener's port", dir, who)
			}
		}
	}
}

// The policy check can fail: a rule that admits any pod of any namespace,
// or the scraper's namespace alone, is caught.
func TestTheNetworkPolicyCheckCatchesAnOpenRule(t *testing.T) {
	objs := render(t, "base")
	np := find[*networkingv1.NetworkPolicy](objs)
	if np == nil {
		t.Fatal("the base renders no NetworkPolicy")
	}
	port := find[*appsv1.Deployment](objs).Spec.Template.Spec.Containers[0].Ports[0]
	stranger := map[string]string{"app.kubernetes.io/name": "anything"}
	open := np.DeepCopy()
	open.Spec.Ingress[0].From = nil
	if !admits(t, open, map[string]string{}, stranger, false, port) {
		t.Error("a rule without peers was read as closed")
	}
	split := np.DeepCopy()
	peer := split.Spec.Ingress[0].From[0]
	split.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: peer.NamespaceSelector}, {PodSelector: peer.PodSelector}}
	if !admits(t, split, scrapers["base"].namespace, stranger, false, port) {
		t.Error("a peer naming the scraper's namespace alone was read as admitting its scraper alone")
	}
}
