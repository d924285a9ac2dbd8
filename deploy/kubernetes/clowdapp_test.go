package kubernetes

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// clowdAppSchema compiles the ClowdApp CRD's OpenAPI schema (served
// version v1alpha1) as a JSON schema, stricter than the API server in one
// way: an object that lists its properties and does not preserve unknown
// fields refuses others (the server would drop a misspelt field without a
// word; decodeStrict refuses it for the other manifests too).
func clowdAppSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile("testdata/clowder/cloud.redhat.com_clowdapps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			s = v.Schema.OpenAPIV3Schema
		}
	}
	if s == nil {
		t.Fatal("the CRD has no v1alpha1 schema")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("clowdapp.json", toJSONSchema(s)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("clowdapp.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// toJSONSchema turns an OpenAPI v3 structural schema into a JSON schema:
// int-or-string and nullable become JSON schema's, objects with
// properties refuse unknown fields unless they preserve them, and the
// x-kubernetes extensions go.
func toJSONSchema(v any) any {
	switch n := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range n {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "nullable" {
				continue
			}
			out[k] = toJSONSchema(x)
		}
		if n["x-kubernetes-int-or-string"] == true {
			delete(out, "type")
			out["anyOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		if n["nullable"] == true {
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
		}
		if _, ok := n["properties"]; ok && n["x-kubernetes-preserve-unknown-fields"] != true {
			if _, has := n["additionalProperties"]; !has {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = toJSONSchema(x)
		}
		return out
	}
	return v
}

func loadYAML(t *testing.T, text []byte) any {
	t.Helper()
	j, err := yaml.YAMLToJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// deploy/clowdapp.yaml is a ClowdApp the CRD's schema accepts, and it
// requests every topic the listener reads or writes by its default name.
func TestTheClowdAppFitsTheCRD(t *testing.T) {
	sch := clowdAppSchema(t)
	b, err := os.ReadFile("../clowdapp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(loadYAML(t, b)); err != nil {
		t.Fatalf("deploy/clowdapp.yaml: %v", err)
	}
	for _, topic := range []string{"platform.inventory.events", "platform.remediation-updates.patch", "platform.notifications.ingress", "platform.payload-status"} {
		if !strings.Contains(string(b), "topicName: "+topic+"\n") {
			t.Errorf("deploy/clowdapp.yaml requests no topic %s", topic)
		}
	}
}

// The check refuses a misspelt field, a wrong type and a missing envName.
func TestTheClowdAppCheckCatchesMistakes(t *testing.T) {
	sch := clowdAppSchema(t)
	b, err := os.ReadFile("../clowdapp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"misspelt field": func(s string) string { return strings.Replace(s, "kafkaTopics:", "kafkaTopic:", 1) },
		"wrong type":     func(s string) string { return strings.Replace(s, "replicas: 3", "replicas: three", 1) },
		"no envName":     func(s string) string { return strings.Replace(s, "  envName: env-patchflow\n", "", 1) },
	} {
		bad := edit(string(b))
		if bad == string(b) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if err := sch.Validate(loadYAML(t, []byte(bad))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
