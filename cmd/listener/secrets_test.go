package main_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"regexp"
	"testing"
)

// gunzipped is b decompressed when it is gzip (a profile in pprof's
// format), else b.
func gunzipped(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return b
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return b
	}
	return out
}

// The listener run with every secret setting given, some as flags and some
// in its environment (and some in both, the flag winning), and the
// profiler on: no endpoint answers any of them. /debug/pprof/cmdline once
// answered the database and SASL passwords verbatim.
func TestNoSecretOnAnyEndpoint(t *testing.T) {
	bin := buildProvingListener(t)
	secrets := map[string]string{
		"database password, flag":         "dbFlagPw7Kq2",
		"database password, environment":  "dbEnvPw9Xr4",
		"PGPASSWORD":                      "pgEnvPw3Lm8",
		"SASL password, flag":             "saslFlagPw5Tz1",
		"SASL password, environment":      "saslEnvPw2Hc6",
		"release token, flag":             "releaseFlagTok0123456789",
		"release token, environment":      "releaseEnvTok9876543210",
		"VMaaS password, flag":            "vmaasFlagPw4Jd7",
		"VMaaS password, environment":     "vmaasEnvPw6Bn3",
		"inventory password, environment": "invEnvPw8Wq5",
	}
	argv := []string{bin, "-log-format", "text", "-pprof",
		"-database-url", "postgres://patch:" + secrets["database password, flag"] + "@db.example:5432/patch",
		"-kafka-sasl-password=" + secrets["SASL password, flag"],
		"--release-token", secrets["release token, flag"],
		"-vmaas-url=http://vmaas:" + secrets["VMaaS password, flag"] + "@vmaas.example",
	}
	p := startCommand(t, argv,
		"DATABASE_URL=host=db.example user=patch password="+secrets["database password, environment"],
		"PGPASSWORD="+secrets["PGPASSWORD"],
		"KAFKA_SASL_PASSWORD="+secrets["SASL password, environment"],
		"LISTENER_RELEASE_TOKEN="+secrets["release token, environment"],
		"VMAAS_URL=http://vmaas:"+secrets["VMaaS password, environment"]+"@vmaas.example",
		"INVENTORY_URL=http://inventory:"+secrets["inventory password, environment"]+"@inventory.example")
	waitReady(t, p)

	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get("http://" + p.HTTPAddr + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, gunzipped(b)
	}
	paths := []string{"/metrics", "/healthz", "/readyz", "/status", "/status.json", "/debug/pprof/",
		"/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"}
	// Every profile the index lists, in each of its forms.
	_, index := get("/debug/pprof/")
	for _, m := range regexp.MustCompile(`href='([a-z]+)\?debug=1'`).FindAllSubmatch(index, -1) {
		name := string(m[1])
		switch name {
		case "cmdline", "profile", "symbol", "trace":
			continue // above
		}
		paths = append(paths, "/debug/pprof/"+name, "/debug/pprof/"+name+"?debug=1", "/debug/pprof/"+name+"?debug=2")
	}
	if len(paths) < 20 {
		t.Fatalf("the profiler's index lists too few profiles:\n%s", index)
	}
	bodies := map[string][]byte{}
	for _, path := range paths {
		code, body := get(path)
		if code != http.StatusOK && path != "/debug/pprof/cmdline" {
			t.Errorf("%s answered %d, want 200:\n%.200s", path, code, body)
		}
		bodies[path] = body
	}
	// The release route, asked without the token.
	resp, err := http.Post("http://"+p.HTTPAddr+"/records/release?topic=t&partition=0&offset=0", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	bodies["POST /records/release"] = b
	bodies["the log"] = []byte(p.Logs())

	for where, body := range bodies {
		for what, secret := range secrets {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("%s shows the %s", where, what)
			}
		}
	}
	if !bytes.Contains(bodies["/status"], []byte("vmaas.example")) {
		t.Errorf("the status page does not show the settings (it shows none of the secrets for nothing):\n%s", bodies["/status"])
	}
}
