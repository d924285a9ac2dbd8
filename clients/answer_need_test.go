package clients_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// realisticAnswers are the platform mock's answers for the event loadgen
// sends by default (400 packages, 150 repositories, about 100 KB): VMaaS's
// updates for its packages and the inventory's page of its profile.
func realisticAnswers(t *testing.T) (updates, profile []byte) {
	t.Helper()
	o := loadgen.DefaultOptions()
	ds := platform.NewDataset(o.Seed, platform.DefaultSize())
	host := platform.HostID(o.Seed, 7)
	event, err := loadgen.Render(ds, o, loadgen.Item{Event: platform.EventSpec{Type: "updated", HostID: host, OrgID: "org-7",
		Revision: 2, Timestamp: o.Start.Add(time.Hour), RequestID: "req-7", Bulk: true}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := inventory.DecodeInventoryEvent(event, inventory.DefaultValidationOptions())
	if err != nil {
		t.Fatal(err)
	}
	nevras, err := inventory.ParsedPackages(ev.Host.SystemProfile)
	if err != nil || len(nevras) != 400 {
		t.Fatalf("%d packages, %v; want the realistic 400", len(nevras), err)
	}
	var req clients.UpdatesRequest
	for _, n := range nevras {
		req.PackageList = append(req.PackageList, n.Name+"-"+n.EVRA())
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	mock, err := platform.NewServer(ds, platform.ServerOptions{Shape: o.Shape})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(r *http.Request) []byte {
		w := httptest.NewRecorder()
		mock.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: the mock answered %d: %s", r.Method, r.URL, w.Code, w.Body)
		}
		return w.Body.Bytes()
	}
	updates = ask(httptest.NewRequest(http.MethodPost, "/api/v3/updates", bytes.NewReader(body)))
	profile = ask(httptest.NewRequest(http.MethodGet, "/api/inventory/v1/hosts/"+host+"/system_profile", nil))
	return updates, profile
}

// repeat is prefix, n items (item(i)) separated by commas, and suffix.
func repeat(prefix string, n int, item func(i int) string, suffix string) []byte {
	var b strings.Builder
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	b.WriteString(suffix)
	return []byte(b.String())
}

func same(s string) func(int) string { return func(int) string { return s } }

// The need the clients charge an answer to the answer budget holds above
// what reading and decoding it keeps alive, on the realistic answers and
// on the hostile ones that weigh most per byte: the most compact JSON for
// each Go value the answer becomes (an update from "{}", a package from
// "null", a repository from ""), strings that grow when decoded (invalid
// UTF-8), strings allocated one by one, and a document the fast decoder
// leaves to encoding/json. It is what makes the budget a bound on memory,
// not a guess. The realistic answers need no more than was reserved for
// them before they were read, so they are never refused room mid-answer.
func TestAnswerNeedBoundsTheLiveSet(t *testing.T) {
	updates, profile := realisticAnswers(t)
	const n = 200_000
	update := `{"package":"p-1:2-3.x","package_name":"p","evra":"1:2-3.x","erratum":"E","repository":"r","basearch":"x","releasever":"8"}`
	vmaas := []struct {
		name string
		body []byte
	}{
		{"realistic", updates},
		{"empty updates of one package", repeat(`{"update_list":{"a":{"available_updates":[`, n, same(`{}`), `]}}}`)},
		{"null updates of one package", repeat(`{"update_list":{"a":{"available_updates":[`, n, same(`null`), `]}}}`)},
		{"one empty update per package", repeat(`{"update_list":{`, n, func(i int) string { return fmt.Sprintf(`"%x":{"available_updates":[{}]}`, i) }, `}}`)},
		{"null packages", repeat(`{"update_list":{`, n, func(i int) string { return fmt.Sprintf(`"%x":null`, i) }, `}}`)},
		{"empty packages", repeat(`{"update_list":{`, n, func(i int) string { return fmt.Sprintf(`"%x":{}`, i) }, `}}`)},
		{"empty repositories", repeat(`{"update_list":{},"repository_list":[`, n, same(`""`), `]}`)},
		{"null repositories", repeat(`{"update_list":{},"repository_list":[`, n, same(`null`), `]}`)},
		{"invalid UTF-8", repeat(`{"update_list":{},"repository_list":[`, n/10, same("\""+strings.Repeat("\xff", 30)+"\""), `]}`)},
		{"escaped strings", repeat(`{"update_list":{"a":{"available_updates":[`, n/4, same(`{"package":"\n","erratum":"\t"}`), `]}}}`)},
		{"long strings", repeat(`{"update_list":{},"repository_list":[`, 200, same(`"`+strings.Repeat("r", 2049)+`"`), `]}`)},
		{"typical updates of one package", repeat(`{"update_list":{"a":{"available_updates":[`, n/20, same(update), `]}}}`)},
		// update_list twice: encoding/json decodes it, merging the two.
		{"left to encoding/json", repeat(`{"update_list":{"b":null},"update_list":{"a":{"available_updates":[`, n, same(`{}`), `]}}}`)},
	}
	for _, s := range vmaas {
		live := liveSet(t, s.body, func(b []byte) any {
			var resp clients.UpdatesResponse
			if err := clients.UnmarshalUpdates(b, &resp); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			return [2]any{&resp, resp.Clone()} // the answer and the cache's copy
		})
		check(t, "vmaas: "+s.name, s.body, live, clients.VMaaSNeed, clients.VMaaSAnticipate, s.name == "realistic")
	}

	inv := []struct {
		name string
		body []byte
	}{
		{"realistic", profile},
		{"empty results", repeat(`{"results":[`, n, same(`{}`), `]}`)},
		{"null results", repeat(`{"results":[`, n, same(`null`), `]}`)},
		{"ids", repeat(`{"results":[`, n/2, func(i int) string { return fmt.Sprintf(`{"id":"%x"}`, i) }, `]}`)},
		{"invalid UTF-8 ids", repeat(`{"results":[`, n/10, same("{\"id\":\""+strings.Repeat("\xff", 30)+"\"}"), `]}`)},
		{"empty profiles", repeat(`{"results":[`, n/2, same(`{"system_profile":{}}`), `]}`)},
	}
	for _, s := range inv {
		live := liveSet(t, s.body, func(b []byte) any {
			page, err := clients.DecodeProfilePage(b)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			return page
		})
		check(t, "inventory: "+s.name, s.body, live, clients.InventoryNeed, clients.InventoryAnticipate, s.name == "realistic")
	}
}

func check(t *testing.T, name string, body []byte, live int64, need func([]byte, int) int64, anticipate func(int64) int64, realistic bool) {
	t.Helper()
	charged := need(body, len(body)+1) // read into a buffer of its announced length, +1
	t.Logf("%s: %d bytes, %d live decoded (%.1f×), charged %d (%.1f×)", name, len(body), live,
		float64(live)/float64(len(body)), charged, float64(charged)/float64(len(body)))
	if live > charged {
		t.Errorf("%s: reading and decoding keeps %d bytes alive, the answer is charged %d", name, live, charged)
	}
	if realistic && charged > anticipate(int64(len(body)+1)) {
		t.Errorf("%s: charged %d once read, more than the %d reserved before", name, charged, anticipate(int64(len(body)+1)))
	}
}

// liveSet is the heap held after decode ran on a copy of body, with the
// body and everything decode returned still referenced.
func liveSet(t *testing.T, body []byte, decode func([]byte) any) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // twice: sync.Pool's victims go in the second
	runtime.ReadMemStats(&before)
	b := append([]byte(nil), body...)
	v := decode(b)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(b)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}
