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
	policyv1 "k8s.io/api/policy/v1"
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
