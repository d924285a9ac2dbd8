package clients

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/internal/jsonscan"
)

// The hand-written JSON of the updates API must be invisible: these tests
// compare it with encoding/json, which wrote every request and read every
// answer before it.

// realisticAnswer is shaped like the platform mock's answer for a host of
// 400 packages: about half have updates, one to five each, most with an
// erratum, from a few repositories.
func realisticAnswer(tb testing.TB) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	resp := UpdatesResponse{UpdateList: map[string]PackageUpdates{}, Releasever: "8", Basearch: "x86_64", LastChange: "2026-11-01T00:00:00Z"}
	for i := range 400 {
		name := fmt.Sprintf("pkg-%04d", rng.IntN(3000))
		installed := fmt.Sprintf("%s-0:%d.0.0-%d.el8.x86_64", name, 1+rng.IntN(5), 1+rng.IntN(9))
		ups := []Update{}
		if i%2 == 0 {
			for v := range 1 + rng.IntN(5) {
				evra := fmt.Sprintf("0:%d.%d.0-%d.el8.x86_64", 1+rng.IntN(5), v+1, 1+rng.IntN(9))
				u := Update{Package: name + "-" + evra, PackageName: name, EVRA: evra,
					Repository: fmt.Sprintf("repo-%03d-rpms", rng.IntN(12)), Basearch: "x86_64", Releasever: "8"}
				if rng.IntN(10) < 8 {
					u.Erratum = fmt.Sprintf("RHSA-2026:%05d", rng.IntN(4000))
				}
				ups = append(ups, u)
			}
		}
		resp.UpdateList[installed] = PackageUpdates{AvailableUpdates: ups}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// answers are VMaaS bodies, good and broken, around what unmarshalUpdates
// reads: the seeds of FuzzUnmarshalUpdates, all run by
// TestUnmarshalUpdatesMatchesUnmarshal.
func answers(tb testing.TB) map[string][]byte {
	realistic := realisticAnswer(tb)
	var indented bytes.Buffer
	if err := json.Indent(&indented, realistic, "", "  "); err != nil {
		tb.Fatal(err)
	}
	const update = `{"package":"a-2-1.x","package_name":"a","evra":"2-1.x","erratum":"RHSA-1","repository":"r","basearch":"x","releasever":"8"}`
	list := func(entries string) []byte {
		return []byte(`{"update_list":{` + entries + `},"repository_list":["r"],"releasever":"8"}`)
	}
	return map[string][]byte{
		"realistic":                realistic,
		"indented":                 indented.Bytes(),
		"truncated":                realistic[:len(realistic)/2],
		"empty":                    nil,
		"null":                     []byte(`null`),
		"empty object":             []byte(`{}`),
		"empty update list":        []byte(`{"update_list":{}}`),
		"null update list":         []byte(`{"update_list":null}`),
		"update list an array":     []byte(`{"update_list":[1,2]}`),
		"html page":                []byte(`<html><body>502 Bad Gateway</body></html>`),
		"array":                    []byte(`[]`),
		"trailing garbage":         append(slices.Clone(realistic), " x"...),
		"unknown fields":           list(`"a-1-1.x":{"available_updates":[` + update + `],"x":[{"y":null}]},"z":{}`),
		"null entry":               list(`"a-1-1.x":null`),
		"null updates":             list(`"a-1-1.x":{"available_updates":null}`),
		"no updates field":         list(`"a-1-1.x":{}`),
		"empty updates":            list(`"a-1-1.x":{"available_updates":[]},"b-1-1.x":{"available_updates":[` + update + `]}`),
		"empty updates first":      list(`"a-1-1.x":{"available_updates":[]}`),
		"null update":              list(`"a-1-1.x":{"available_updates":[null,` + update + `]}`),
		"null strings":             list(`"a-1-1.x":{"available_updates":[{"package":null,"erratum":null}]}`),
		"repeated package":         list(`"a-1-1.x":{"available_updates":[` + update + `]},"a-1-1.x":{"available_updates":[]}`),
		"repeated updates field":   list(`"a-1-1.x":{"available_updates":[` + update + `],"available_updates":[{"package":"b"}]}`),
		"repeated update field":    list(`"a-1-1.x":{"available_updates":[{"erratum":"RHSA-1","erratum":"RHSA-2"}]}`),
		"repeated update list":     []byte(`{"update_list":{"a":{}},"update_list":{"b":{}}}`),
		"upper case field":         list(`"a-1-1.x":{"Available_Updates":[` + update + `]}`),
		"folded field":             list(`"a-1-1.x":{"available_update\u017f":[` + update + `]}`),
		"escapes":                  list(`"a-\u0031-1.x":{"available_updates":[{"package":"\u0061\n\"","erratum":"RHSA\ud800"}]}`),
		"invalid UTF-8":            list("\"a-1-1.x\xff\":{\"available_updates\":[{\"package\":\"\xfe\"}]}"),
		"update a string":          list(`"a-1-1.x":{"available_updates":["x"]}`),
		"updates an object":        list(`"a-1-1.x":{"available_updates":{}}`),
		"erratum a number":         list(`"a-1-1.x":{"available_updates":[{"erratum":1}]}`),
		"repository list null":     []byte(`{"update_list":{},"repository_list":null}`),
		"repository list empty":    []byte(`{"update_list":{},"repository_list":[]}`),
		"repository list a string": []byte(`{"update_list":{},"repository_list":"r"}`),
		"deep junk":                []byte(`{"update_list":{},"x":` + strings.Repeat("[", 800) + strings.Repeat("]", 800) + `}`),
		"junk too deep":            []byte(`{"update_list":{},"x":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `}`),
	}
}

// checkSameAnswer fails the test unless unmarshalUpdates gives what
// json.Unmarshal gives on data, error included, and its scanner, when it
// takes data, decodes what json.Unmarshal decodes.
func checkSameAnswer(t *testing.T, name string, data []byte) {
	t.Helper()
	var got, want UpdatesResponse
	gotErr := unmarshalUpdates(data, &got)
	wantErr := json.Unmarshal(data, &want)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%s: unmarshalUpdates = %+v, %v\njson.Unmarshal %+v, %v", name, got, gotErr, want, wantErr)
	}
	if scanned, err := scanAnswer(data); scanned && err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// scanAnswer runs the scanner alone: it reports whether it took data, and
// an error if it took what json.Unmarshal refuses or decodes otherwise.
func scanAnswer(data []byte) (bool, error) {
	var fast, slow UpdatesResponse
	s := jsonscan.New(data)
	scanUpdatesResponse(s, &fast)
	if !s.End() {
		return false, nil
	}
	if err := json.Unmarshal(data, &slow); err != nil {
		return true, fmt.Errorf("the scanner took what json.Unmarshal refuses: %v", err)
	}
	if !reflect.DeepEqual(fast, slow) {
		return true, fmt.Errorf("the scanner decoded\n%+v\njson.Unmarshal\n%+v", fast, slow)
	}
	return true, nil
}

func TestUnmarshalUpdatesMatchesUnmarshal(t *testing.T) {
	for name, data := range answers(t) {
		checkSameAnswer(t, name, data)
	}
}

func FuzzUnmarshalUpdates(f *testing.F) {
	for _, data := range answers(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSameAnswer(t, "fuzzed", data) })
}

// TestScannerTakesAnswers guards the speed: the scanner takes VMaaS's
// answers, and leaves the unusual ones to json.Unmarshal.
func TestScannerTakesAnswers(t *testing.T) {
	all := answers(t)
	for _, name := range []string{"realistic", "indented", "null", "empty object", "empty update list", "null update list",
		"unknown fields", "null entry", "null updates", "empty updates", "empty updates first", "null update", "null strings",
		"repeated package", "escapes", "invalid UTF-8", "repository list null", "repository list empty", "deep junk"} {
		if scanned, _ := scanAnswer(all[name]); !scanned {
			t.Errorf("%s: left to json.Unmarshal", name)
		}
	}
	for _, name := range []string{"truncated", "repeated updates field", "repeated update field", "repeated update list",
		"upper case field", "folded field", "update a string", "junk too deep", "html page"} {
		if scanned, _ := scanAnswer(all[name]); scanned {
			t.Errorf("%s: taken by the scanner", name)
		}
	}
}

// TestAnswerUpdatesAreCapped: appending to one package's updates must not
// overwrite the next package's, which share the array.
func TestAnswerUpdatesAreCapped(t *testing.T) {
	var resp UpdatesResponse
	if err := unmarshalUpdates(realisticAnswer(t), &resp); err != nil {
		t.Fatal(err)
	}
	want := resp.Clone()
	for k, v := range resp.UpdateList {
		resp.UpdateList[k] = PackageUpdates{AvailableUpdates: append(v.AvailableUpdates, Update{Package: "appended"})}
	}
	for k, v := range resp.UpdateList {
		if got := v.AvailableUpdates[:len(v.AvailableUpdates)-1]; !reflect.DeepEqual(got, want.UpdateList[k].AvailableUpdates) &&
			!(len(got) == 0 && len(want.UpdateList[k].AvailableUpdates) == 0) {
			t.Fatalf("%s: updates %+v after appending to the others, want %+v", k, got, want.UpdateList[k].AvailableUpdates)
		}
	}
}

// requests are UpdatesRequests around what appendRequest writes.
func requests() map[string]*UpdatesRequest {
	return map[string]*UpdatesRequest{
		"zero":            {},
		"empty lists":     {PackageList: []string{}, RepositoryList: []string{}, ModulesList: []Module{}},
		"every field":     {PackageList: []string{"a-1-1.x", "b-0:2-3.el8.x86_64"}, RepositoryList: []string{"r1", "r2"}, ModulesList: []Module{{"nodejs", "18"}, {"", ""}}, Releasever: "8", Basearch: "x86_64", SecurityOnly: true, LatestOnly: true, ThirdParty: true, EpochRequired: true},
		"html":            {PackageList: []string{"<a>&b", "x\"y\\z"}, Releasever: "<8>", Basearch: "&"},
		"control":         {PackageList: []string{"a\x00b\x01\t\n\r\b\f\x1f", "\x7f"}, ModulesList: []Module{{"m\n", "s\x00"}}},
		"unicode":         {PackageList: []string{"café", "\u2028\u2029", "😀"}, RepositoryList: []string{"\u00e9"}},
		"invalid UTF-8":   {PackageList: []string{"\xff", "a\xc3", "\xed\xa0\x80"}, Basearch: "\xfe"},
		"only modules":    {ModulesList: []Module{{"php", "8.1"}}},
		"only releasever": {Releasever: "9"},
	}
}

func TestAppendRequestMatchesMarshal(t *testing.T) {
	for name, req := range requests() {
		checkSameRequest(t, name, req)
	}
}

// FuzzAppendRequest builds requests of the strings it is given, cut at
// NUL bytes.
func FuzzAppendRequest(f *testing.F) {
	f.Add("a-1-1.x\x00b-1-1.x", "r1\x00r2", "nodejs\x0018", "8", "x86_64", byte(5))
	f.Add("<&>\x00\"\\", "\u2028", "\xff\x00\x7f", "", "\x01", byte(0))
	f.Fuzz(func(t *testing.T, packages, repos, modules, releasever, basearch string, flags byte) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\x00")
		}
		req := &UpdatesRequest{PackageList: split(packages), RepositoryList: split(repos), Releasever: releasever, Basearch: basearch,
			SecurityOnly: flags&1 != 0, LatestOnly: flags&2 != 0, ThirdParty: flags&4 != 0, EpochRequired: flags&8 != 0}
		m := split(modules)
		for i := 0; i+1 < len(m); i += 2 {
			req.ModulesList = append(req.ModulesList, Module{Name: m[i], Stream: m[i+1]})
		}
		checkSameRequest(t, "fuzzed", req)
	})
}

func checkSameRequest(t *testing.T, name string, req *UpdatesRequest) {
	t.Helper()
	want, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendRequest(nil, req); !bytes.Equal(got, want) {
		t.Errorf("%s: appendRequest =\n%s\njson.Marshal\n%s", name, got, want)
	}
	body, key := canonicalBody(req)
	wantBody, wantKey := legacyCanonicalBody(t, req)
	if !bytes.Equal(body, wantBody) || key != wantKey {
		t.Errorf("%s: canonicalBody =\n%s\nas before\n%s", name, body, wantBody)
	}
}

// legacyCanonicalBody is canonicalBody as it was: sorted with comparison
// functions, encoded by json.Marshal.
func legacyCanonicalBody(tb testing.TB, req *UpdatesRequest) ([]byte, cacheKey) {
	c := *req
	c.PackageList = sortedUnique(req.PackageList, strings.Compare)
	if c.PackageList == nil {
		c.PackageList = []string{}
	}
	c.RepositoryList = sortedUnique(req.RepositoryList, strings.Compare)
	c.ModulesList = sortedUnique(req.ModulesList, func(a, b Module) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Stream, b.Stream))
	})
	body, err := json.Marshal(&c)
	if err != nil {
		tb.Fatal(err)
	}
	return body, sha256.Sum256(body)
}

// realisticRequest is a host's request: 400 packages in the handler's
// order, two modules.
func realisticRequest() *UpdatesRequest {
	rng := rand.New(rand.NewPCG(5, 6))
	req := &UpdatesRequest{Releasever: "8", Basearch: "x86_64", ModulesList: []Module{{"nodejs", "18"}, {"postgresql", "13"}}}
	for range 400 {
		req.PackageList = append(req.PackageList, fmt.Sprintf("pkg-%04d-0:%d.%d.0-%d.el8.x86_64", rng.IntN(3000), 1+rng.IntN(5), rng.IntN(6), 1+rng.IntN(9)))
	}
	return req
}

func BenchmarkCanonicalBodyBeside(b *testing.B) {
	req := realisticRequest()
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			legacyCanonicalBody(b, req)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			canonicalBody(req)
		}
	})
}

func BenchmarkUpdatesResponseBeside(b *testing.B) {
	data := realisticAnswer(b)
	b.Run("unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			var resp UpdatesResponse
			if err := json.Unmarshal(data, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			var resp UpdatesResponse
			if err := unmarshalUpdates(data, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUpdatesResponseClone(b *testing.B) {
	var resp UpdatesResponse
	if err := unmarshalUpdates(realisticAnswer(b), &resp); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer measureCPU(b)()
	for b.Loop() {
		resp.Clone()
	}
}

// measureCPU reports, beside the wall-clock ns/op that the machine's other
// work inflates, the CPU time the process spent per iteration (garbage
// collection included): call it before the loop and defer what it returns.
func measureCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
