package clients

import "slices"

// UpdatesRequest is the body of POST /api/v3/updates.
//
// RepositoryList, ModulesList, Releasever and Basearch are omitted from the
// JSON when empty because VMaaS reads a present-but-empty value as a filter
// that matches nothing (an empty repository_list yields no updates at all),
// while an absent one means "do not filter".
type UpdatesRequest struct {
	PackageList    []string `json:"package_list"`
	RepositoryList []string `json:"repository_list,omitempty"`
	ModulesList    []Module `json:"modules_list,omitempty"`
	Releasever     string   `json:"releasever,omitempty"`
	Basearch       string   `json:"basearch,omitempty"`
	SecurityOnly   bool     `json:"security_only"`
	LatestOnly     bool     `json:"latest_only"`
	ThirdParty     bool     `json:"third_party"`
	EpochRequired  bool     `json:"epoch_required"`
}

// updatesFields are the names of the fields an updates request sends
// (canonicalBody writes them): a 422 whose body names one of them refuses
// the request's input, so it is permanent (see refusals.blame).
var updatesFields = []string{"package_list", "repository_list", "modules_list", "module_name", "module_stream",
	"releasever", "basearch", "security_only", "latest_only", "third_party", "epoch_required"}

// Module is an enabled module stream of the host (RHEL 8+ modularity).
type Module struct {
	Name   string `json:"module_name"`
	Stream string `json:"module_stream"`
}

// UpdatesResponse is the answer of POST /api/v3/updates. Fields VMaaS adds
// later are ignored.
type UpdatesResponse struct {
	// UpdateList is keyed by the installed package's NEVRA exactly as it
	// was sent in the request's package list.
	UpdateList     map[string]PackageUpdates `json:"update_list"`
	RepositoryList []string                  `json:"repository_list"`
	Releasever     string                    `json:"releasever"`
	Basearch       string                    `json:"basearch"`
	LastChange     string                    `json:"last_change"`
}

// PackageUpdates lists the updates available for one installed package.
type PackageUpdates struct {
	AvailableUpdates []Update `json:"available_updates"`
}

// Update is one available update. An empty Erratum means a plain package
// update that no advisory covers.
type Update struct {
	Package     string `json:"package"`
	PackageName string `json:"package_name"`
	EVRA        string `json:"evra"`
	Erratum     string `json:"erratum"`
	Repository  string `json:"repository"`
	Basearch    string `json:"basearch"`
	Releasever  string `json:"releasever"`
}

// Clone returns a deep copy of r, so the copy can be modified without
// touching r. The updates of all entries are copied into one array, each
// entry's slice capped at its length (appending to one reallocates it
// rather than overwrite the next); nil and empty slices and maps keep their
// nil-ness.
func (r *UpdatesResponse) Clone() *UpdatesResponse {
	if r == nil {
		return nil
	}
	c := *r
	if r.UpdateList != nil {
		n := 0
		for _, v := range r.UpdateList {
			n += len(v.AvailableUpdates)
		}
		// Update holds only strings, which are immutable: copying the
		// updates is a deep copy.
		all := make([]Update, 0, n)
		c.UpdateList = make(map[string]PackageUpdates, len(r.UpdateList))
		for k, v := range r.UpdateList {
			if len(v.AvailableUpdates) > 0 {
				start := len(all)
				all = append(all, v.AvailableUpdates...)
				v.AvailableUpdates = all[start:len(all):len(all)]
			} else {
				v.AvailableUpdates = slices.Clone(v.AvailableUpdates) // nil or empty, without allocating
			}
			c.UpdateList[k] = v
		}
	}
	c.RepositoryList = slices.Clone(r.RepositoryList)
	return &c
}
