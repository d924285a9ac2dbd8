package platform

import (
	"fmt"
	"math/rand/v2"
)

// SystemProfileDoc is a host's system_profile as the inventory service
// reports it. The listener reads a few fields; the rest (with bulk) make a
// realistic-size document (about 100 KB for the default shape) that the
// listener has to skip.
type SystemProfileDoc struct {
	Arch              string           `json:"arch"`
	HostType          string           `json:"host_type,omitempty"`
	InstalledPackages []string         `json:"installed_packages"`
	YumRepos          []Repo           `json:"yum_repos"`
	DnfModules        []Module         `json:"dnf_modules,omitempty"`
	RHSM              map[string]any   `json:"rhsm"`
	Releasever        string           `json:"releasever"`
	OperatingSystem   map[string]any   `json:"operating_system"`
	OwnerID           string           `json:"owner_id"`
	CPUFlags          []string         `json:"cpu_flags,omitempty"`
	KernelModules     []string         `json:"kernel_modules,omitempty"`
	RunningProcesses  []string         `json:"running_processes,omitempty"`
	InstalledServices []string         `json:"installed_services,omitempty"`
	EnabledServices   []string         `json:"enabled_services,omitempty"`
	NetworkInterfaces []map[string]any `json:"network_interfaces,omitempty"`
	InstalledProducts []map[string]any `json:"installed_products,omitempty"`
	DiskDevices       []map[string]any `json:"disk_devices,omitempty"`
	SystemMemoryBytes int64            `json:"system_memory_bytes,omitempty"`
	NumberOfCPUs      int              `json:"number_of_cpus,omitempty"`
	BIOSVendor        string           `json:"bios_vendor,omitempty"`
	InfrastructureTyp string           `json:"infrastructure_type,omitempty"`
	Tuned             map[string]any   `json:"tuned_profile,omitempty"`
	SELinux           string           `json:"selinux_current_mode,omitempty"`
	LastBootTime      string           `json:"last_boot_time,omitempty"`
}

// SystemProfile builds the document of p; with bulk, it carries the whole
// profile a real host reports.
func SystemProfile(p Profile, bulk bool) SystemProfileDoc {
	doc := SystemProfileDoc{
		Arch: Arch, InstalledPackages: p.Packages, YumRepos: p.Repos, DnfModules: p.Modules,
		RHSM: map[string]any{"version": p.RHSMVersion}, Releasever: Releasever,
		OperatingSystem: map[string]any{"name": "RHEL", "major": 8, "minor": p.OSMinor},
		OwnerID:         "c7a2b0f4-1e4d-4a8e-9d6b-" + fmt.Sprintf("%012x", hostSeed(0, p.HostID)&0xffffffffffff),
	}
	if !bulk {
		return doc
	}
	rng := rand.New(rand.NewPCG(hostSeed(7, p.HostID), 2))
	for i := 0; i < 110; i++ {
		doc.CPUFlags = append(doc.CPUFlags, fmt.Sprintf("flag%02d_%s", i, []string{"sse", "avx", "aes", "vmx", "fma"}[i%5]))
	}
	for i := 0; i < 180; i++ {
		doc.KernelModules = append(doc.KernelModules, fmt.Sprintf("mod_%03d_%s", i, []string{"xfs", "nf_tables", "virtio", "kvm", "tls"}[i%5]))
	}
	for i := 0; i < 1150; i++ {
		doc.RunningProcesses = append(doc.RunningProcesses, fmt.Sprintf("/usr/libexec/process-%04d --worker=%d", rng.IntN(5000), i))
	}
	for i := 0; i < 450; i++ {
		doc.InstalledServices = append(doc.InstalledServices, fmt.Sprintf("service-%03d.service", i))
	}
	for i := 0; i < 300; i++ {
		doc.EnabledServices = append(doc.EnabledServices, fmt.Sprintf("service-%03d.service", i))
	}
	for i := 0; i < 8; i++ {
		doc.NetworkInterfaces = append(doc.NetworkInterfaces, map[string]any{
			"name": fmt.Sprintf("eth%d", i), "state": "UP", "mtu": 1500, "type": "ether",
			"mac_address":    fmt.Sprintf("52:54:00:%02x:%02x:%02x", rng.IntN(256), rng.IntN(256), rng.IntN(256)),
			"ipv4_addresses": []string{fmt.Sprintf("10.%d.%d.%d", rng.IntN(256), rng.IntN(256), rng.IntN(256))},
			"ipv6_addresses": []string{fmt.Sprintf("fe80::5054:ff:fe%02x:%04x", rng.IntN(256), rng.IntN(65536))},
		})
	}
	doc.InstalledProducts = []map[string]any{{"id": "479", "name": "Red Hat Enterprise Linux for x86_64", "status": "Subscribed"}}
	for i := 0; i < 4; i++ {
		doc.DiskDevices = append(doc.DiskDevices, map[string]any{"device": fmt.Sprintf("/dev/vd%c", 'a'+i), "label": "", "mount_point": fmt.Sprintf("/data%d", i), "type": "xfs", "options": map[string]any{"rw": true, "relatime": true}})
	}
	doc.SystemMemoryBytes = int64(8+rng.IntN(56)) << 30
	doc.NumberOfCPUs = 2 + rng.IntN(30)
	doc.BIOSVendor = "SeaBIOS"
	doc.InfrastructureTyp = "virtual"
	doc.Tuned = map[string]any{"active": "virtual-guest", "profiles": []string{"balanced", "throughput-performance", "virtual-guest"}}
	doc.SELinux = "enforcing"
	doc.LastBootTime = "2026-11-01T08:00:00Z"
	return doc
}
