package inventory

import (
	"encoding/json"

	"github.com/patchflow/patchflow/internal/jsonscan"
)

// The fast path of decoding: the wire types of inventory_wire.go filled by
// a jsonscan.Scanner, which reads the few fields used and skips the bulk of
// the event without the reflection and double scanning of
// json.Unmarshal. It gives up on anything unusual, errors included, and
// json.Unmarshal then decodes the event as before: it alone says what is
// wrong with a broken message. FuzzScanMatchesUnmarshal checks that
// whatever the fast path accepts, json.Unmarshal accepts and decodes to
// the same values.

// unmarshalEvent decodes data into w as json.Unmarshal does, fast when it
// can.
func unmarshalEvent(data []byte, w *wireEvent) error {
	s := jsonscan.New(data)
	scanEvent(s, w)
	if s.End() {
		return nil
	}
	*w = wireEvent{}
	return json.Unmarshal(data, w)
}

// unmarshalProfile is unmarshalEvent for a system profile on its own.
func unmarshalProfile(data []byte, w *wireSystemProfile) error {
	s := jsonscan.New(data)
	if !s.Null() {
		scanProfileObject(s, w)
	}
	if s.End() {
		return nil
	}
	*w = wireSystemProfile{}
	return json.Unmarshal(data, w)
}

// The field lists follow the json tags of the wire types, in order; the
// cases of each switch use their indexes.
var (
	eventFields   = jsonscan.NewFields("type", "timestamp", "id", "org_id", "host", "platform_metadata", "metadata")
	metaFields    = jsonscan.NewFields("request_id")
	hostFields    = jsonscan.NewFields("id", "org_id", "display_name", "reporter", "stale_timestamp", "culled_timestamp", "per_reporter_staleness", "tags", "groups", "system_profile")
	stalenessFlds = jsonscan.NewFields("last_check_in")
	groupFields   = jsonscan.NewFields("id", "name")
	profileFields = jsonscan.NewFields("arch", "host_type", "installed_packages", "yum_repos", "dnf_modules", "rhsm", "releasever", "operating_system", "owner_id")
	repoFields    = jsonscan.NewFields("id", "name", "enabled", "base_url")
	moduleFields  = jsonscan.NewFields("name", "stream")
	rhsmFields    = jsonscan.NewFields("version")
	osFields      = jsonscan.NewFields("name", "major", "minor")
)

// scanEvent reads the top-level value into w: an event object, or null,
// which json.Unmarshal reads as an event with no fields.
func scanEvent(s *jsonscan.Scanner, w *wireEvent) {
	if s.Null() {
		return
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return
	}
	for o.Next() {
		switch o.Field(eventFields) {
		case 0:
			s.String(&w.Type)
		case 1:
			s.String(&w.Timestamp)
		case 2:
			s.String(&w.ID)
		case 3:
			s.String(&w.OrgID)
		case 4:
			w.Host = scanPointer(s, scanHost)
		case 5:
			w.PlatformMetadata = scanPointer(s, scanMetadata)
		case 6:
			w.Metadata = scanPointer(s, scanMetadata)
		default:
			s.Skip()
		}
	}
}

// scanPointer reads a value json.Unmarshal stores through a pointer to a
// struct: nil for null, else a new struct that scan fills from an object.
// A field met twice gives up before this, so the pointer was nil.
func scanPointer[T any](s *jsonscan.Scanner, scan func(*jsonscan.Scanner, *jsonscan.Object, *T)) *T {
	if s.Null() {
		return nil
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return nil
	}
	v := new(T)
	scan(s, &o, v)
	return v
}

// scanSlice reads a value json.Unmarshal stores in a slice: nil for null,
// a non-nil empty slice for [], else the elements read by scan.
func scanSlice[T any](s *jsonscan.Scanner, scan func(*jsonscan.Scanner, *T)) []T {
	if s.Null() {
		return nil
	}
	a, ok := s.Array()
	if !ok {
		s.Fail()
		return nil
	}
	out := []T{}
	for a.Next() {
		var zero T
		out = append(out, zero)
		scan(s, &out[len(out)-1])
	}
	return out
}

// scanStruct reads one element of a slice of structs: null leaves it zero.
func scanStruct[T any](scan func(*jsonscan.Scanner, *jsonscan.Object, *T)) func(*jsonscan.Scanner, *T) {
	return func(s *jsonscan.Scanner, v *T) {
		if s.Null() {
			return
		}
		o, ok := s.Object()
		if !ok {
			s.Fail()
			return
		}
		scan(s, &o, v)
	}
}

// The element readers of the slices of structs.
var (
	scanGroupElem  = scanStruct(scanGroup)
	scanRepoElem   = scanStruct(scanRepo)
	scanModuleElem = scanStruct(scanModule)
)

func scanMetadata(s *jsonscan.Scanner, o *jsonscan.Object, w *wireMetadata) {
	for o.Next() {
		switch o.Field(metaFields) {
		case 0:
			s.String(&w.RequestID)
		default:
			s.Skip()
		}
	}
}

func scanHost(s *jsonscan.Scanner, o *jsonscan.Object, w *wireHost) {
	for o.Next() {
		switch o.Field(hostFields) {
		case 0:
			s.String(&w.ID)
		case 1:
			s.String(&w.OrgID)
		case 2:
			s.String(&w.DisplayName)
		case 3:
			s.String(&w.Reporter)
		case 4:
			s.String(&w.StaleTimestamp)
		case 5:
			s.String(&w.CulledTimestamp)
		case 6:
			w.PerReporterStaleness = scanStaleness(s)
		case 7:
			// json.RawMessage: its own copy of the value as written, the
			// literal null included.
			if raw := s.Raw(); raw != nil {
				w.Tags = append(json.RawMessage(nil), raw...)
			}
		case 8:
			w.Groups = scanSlice(s, scanGroupElem)
		case 9:
			w.SystemProfile = scanPointer(s, scanProfile)
		default:
			s.Skip()
		}
	}
}

// scanStaleness reads per_reporter_staleness: nil for null, else a map
// whose entries each start from zero (a repeated reporter: the last wins),
// as json.Unmarshal fills a map.
func scanStaleness(s *jsonscan.Scanner) map[string]wireStaleness {
	if s.Null() {
		return nil
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return nil
	}
	m := map[string]wireStaleness{}
	for o.Next() {
		reporter := o.Key()
		var v wireStaleness
		if !s.Null() {
			inner, ok := s.Object()
			if !ok {
				s.Fail()
				return nil
			}
			for inner.Next() {
				switch inner.Field(stalenessFlds) {
				case 0:
					s.String(&v.LastCheckIn)
				default:
					s.Skip()
				}
			}
		}
		m[reporter] = v
	}
	return m
}

func scanGroup(s *jsonscan.Scanner, o *jsonscan.Object, g *Group) {
	for o.Next() {
		switch o.Field(groupFields) {
		case 0:
			s.String(&g.ID)
		case 1:
			s.String(&g.Name)
		default:
			s.Skip()
		}
	}
}

// scanProfileObject reads a system profile that must be an object.
func scanProfileObject(s *jsonscan.Scanner, w *wireSystemProfile) {
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return
	}
	scanProfile(s, &o, w)
}

func scanProfile(s *jsonscan.Scanner, o *jsonscan.Object, w *wireSystemProfile) {
	for o.Next() {
		switch o.Field(profileFields) {
		case 0:
			s.String(&w.Arch)
		case 1:
			s.String(&w.HostType)
		case 2:
			w.InstalledPackages = scanSlice(s, (*jsonscan.Scanner).String)
		case 3:
			w.YumRepos = scanSlice(s, scanRepoElem)
		case 4:
			w.DnfModules = scanSlice(s, scanModuleElem)
		case 5:
			w.RHSM = scanPointer(s, scanRHSM)
		case 6:
			s.String(&w.Releasever)
		case 7:
			w.OperatingSystem = scanPointer(s, scanOS)
		case 8:
			s.String(&w.OwnerID)
		default:
			s.Skip()
		}
	}
}

func scanRepo(s *jsonscan.Scanner, o *jsonscan.Object, r *YumRepo) {
	for o.Next() {
		switch o.Field(repoFields) {
		case 0:
			s.String(&r.ID)
		case 1:
			s.String(&r.Name)
		case 2:
			s.Bool(&r.Enabled)
		case 3:
			s.String(&r.BaseURL)
		default:
			s.Skip()
		}
	}
}

func scanModule(s *jsonscan.Scanner, o *jsonscan.Object, m *DnfModule) {
	for o.Next() {
		switch o.Field(moduleFields) {
		case 0:
			s.String(&m.Name)
		case 1:
			s.String(&m.Stream)
		default:
			s.Skip()
		}
	}
}

func scanRHSM(s *jsonscan.Scanner, o *jsonscan.Object, r *wireRHSM) {
	for o.Next() {
		switch o.Field(rhsmFields) {
		case 0:
			s.String(&r.Version)
		default:
			s.Skip()
		}
	}
}

func scanOS(s *jsonscan.Scanner, o *jsonscan.Object, v *OperatingSystem) {
	for o.Next() {
		switch o.Field(osFields) {
		case 0:
			s.String(&v.Name)
		case 1:
			s.Int(&v.Major)
		case 2:
			s.Int(&v.Minor)
		default:
			s.Skip()
		}
	}
}
