package inventory_test

import (
	"fmt"
	"testing"

	"github.com/patchflow/patchflow/inventory"
)

// realisticEvent builds a created event shaped like production ones: the
// fields the listener uses are a minority of the bytes, most of the ~100 KB
// is profile data decoding must skip.
func realisticEvent(tb testing.TB) []byte {
	m := createdEvent()
	p := profileOf(m)

	pkgs := make([]any, 400)
	for i := range pkgs {
		pkgs[i] = fmt.Sprintf("package-name-%03d-0:%d.%d.%d-%d.el8_4.x86_64", i, i%7+1, i%13, i%29, i%5+1)
	}
	p["installed_packages"] = pkgs

	repos := make([]any, 150)
	for i := range repos {
		repos[i] = map[string]any{
			"id":       fmt.Sprintf("rhel-8-for-x86_64-repo-%03d-rpms", i),
			"name":     fmt.Sprintf("Red Hat Enterprise Linux 8 for x86_64 - Repository %d (RPMs)", i),
			"enabled":  i%3 == 0,
			"base_url": fmt.Sprintf("https://cdn.redhat.com/content/dist/rhel8/$releasever/x86_64/repo%d/os", i),
			"gpgcheck": true,
		}
	}
	p["yum_repos"] = repos

	mods := make([]any, 10)
	for i := range mods {
		mods[i] = map[string]any{"name": fmt.Sprintf("module%d", i), "stream": "1.0"}
	}
	p["dnf_modules"] = mods

	procs := make([]any, 2000)
	for i := range procs {
		procs[i] = fmt.Sprintf("kworker/%d:%d-events", i%8, i)
	}
	p["running_processes"] = procs

	flags := make([]any, 120)
	for i := range flags {
		flags[i] = fmt.Sprintf("flag%d", i)
	}
	p["cpu_flags"] = flags

	kmods := make([]any, 150)
	for i := range kmods {
		kmods[i] = fmt.Sprintf("kmod_%d", i)
	}
	p["kernel_modules"] = kmods

	services := make([]any, 120)
	for i := range services {
		services[i] = fmt.Sprintf("service-%d.service", i)
	}
	p["installed_services"] = services
	p["enabled_services"] = services

	nics := make([]any, 4)
	for i := range nics {
		nics[i] = map[string]any{
			"name":           fmt.Sprintf("eth%d", i),
			"ipv4_addresses": []any{fmt.Sprintf("10.0.0.%d", i)},
			"ipv6_addresses": []any{"fe80::1"},
			"mac_address":    "00:11:22:33:44:55",
			"mtu":            1500,
			"state":          "UP",
			"type":           "ether",
		}
	}
	p["network_interfaces"] = nics
	p["disk_devices"] = []any{map[string]any{"device": "/dev/vda1", "mount_point": "/", "type": "xfs", "options": map[string]any{"rw": true}}}
	p["number_of_cpus"] = 8
	p["system_memory_bytes"] = 16 << 30
	p["bios_vendor"] = "SeaBIOS"

	return encode(tb, m)
}

func TestRealisticEventDecodes(t *testing.T) {
	data := realisticEvent(t)
	if n := len(data); n < 80_000 || n > 130_000 {
		t.Errorf("realistic event is %d bytes; the benchmark is meant to measure about 100 KB", n)
	}
	t.Logf("realistic event: %d bytes", len(data))
	ev := decode(t, data)
	if p := ev.Host.SystemProfile; len(p.InstalledPackages) != 400 || len(p.YumRepos) != 150 || len(p.DnfModules) != 10 {
		t.Errorf("decoded %d packages, %d repos, %d modules", len(p.InstalledPackages), len(p.YumRepos), len(p.DnfModules))
	}
}

func BenchmarkDecodeInventoryEvent(b *testing.B) {
	data := realisticEvent(b)
	opts := inventory.DefaultValidationOptions()
	if _, err := inventory.DecodeInventoryEvent(data, opts); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inventory.DecodeInventoryEvent(data, opts); err != nil {
			b.Fatal(err)
		}
	}
}
