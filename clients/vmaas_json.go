package clients

import (
	"encoding/json"
	"strconv"

	"github.com/patchflow/patchflow/internal/jsonscan"
)

// The JSON of the updates API, written and read without reflection: an
// answer is hundreds of updates of seven strings each, and a request
// hundreds of package names. Both give exactly what encoding/json gives
// for these types: appendRequest writes json.Marshal's bytes, and
// unmarshalUpdates fills an UpdatesResponse as json.Unmarshal does, which
// it leaves a body to whenever its scanner gives up (errors included), so
// a bad answer fails with json.Unmarshal's error as before.

// unmarshalUpdates decodes a VMaaS answer into resp as json.Unmarshal does.
func unmarshalUpdates(data []byte, resp *UpdatesResponse) error {
	s := jsonscan.New(data)
	scanUpdatesResponse(s, resp)
	if s.End() {
		return nil
	}
	*resp = UpdatesResponse{}
	return json.Unmarshal(data, resp)
}

var (
	responseFields       = jsonscan.NewFields("update_list", "repository_list", "releasever", "basearch", "last_change")
	packageUpdatesFields = jsonscan.NewFields("available_updates")
	updateFields         = jsonscan.NewFields("package", "package_name", "evra", "erratum", "repository", "basearch", "releasever")
)

func scanUpdatesResponse(s *jsonscan.Scanner, resp *UpdatesResponse) {
	if s.Null() {
		return
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return
	}
	for o.Next() {
		switch o.Field(responseFields) {
		case 0:
			resp.UpdateList = scanUpdateList(s)
		case 1:
			resp.RepositoryList = scanStrings(s)
		case 2:
			s.String(&resp.Releasever)
		case 3:
			s.String(&resp.Basearch)
		case 4:
			s.String(&resp.LastChange)
		default:
			s.Skip()
		}
	}
}

// scanUpdateList reads update_list: nil for null, else a map whose entries
// each start from zero (a repeated package: the last wins), as
// json.Unmarshal fills a map. The updates are decoded into blocks shared
// by many packages, each package's slice capped at its own length so that
// appending to one cannot overwrite the next.
func scanUpdateList(s *jsonscan.Scanner) map[string]PackageUpdates {
	if s.Null() {
		return nil
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return nil
	}
	// The entries are gathered first, so that the map is made at its size
	// rather than grown (and rehashed) several times.
	type entry struct {
		key     string
		updates PackageUpdates
	}
	var entries []entry
	var block updateBlock
	for o.Next() {
		key := o.Key()
		var u PackageUpdates
		if !s.Null() {
			inner, ok := s.Object()
			if !ok {
				s.Fail()
				return nil
			}
			for inner.Next() {
				switch inner.Field(packageUpdatesFields) {
				case 0:
					u.AvailableUpdates = block.scan(s)
				default:
					s.Skip()
				}
			}
		}
		entries = append(entries, entry{key, u})
	}
	if s.Failed() {
		return nil
	}
	m := make(map[string]PackageUpdates, len(entries))
	for _, e := range entries {
		m[e.key] = e.updates // in order: of a repeated package the last wins
	}
	return m
}

// updateBlock holds the updates of consecutive packages, so that an
// answer costs a few allocations rather than one per package.
type updateBlock struct {
	buf []Update // filled up to len; never grown in place
}

const updateBlockSize = 256

// scan reads a list of updates: nil for null, non-nil and empty for [].
func (b *updateBlock) scan(s *jsonscan.Scanner) []Update {
	if s.Null() {
		return nil
	}
	a, ok := s.Array()
	if !ok {
		s.Fail()
		return nil
	}
	start := len(b.buf)
	for a.Next() {
		if len(b.buf) == cap(b.buf) {
			// A new block, with the package's updates read so far: the
			// old block keeps the slices handed out already.
			n := len(b.buf) - start
			fresh := make([]Update, n, max(updateBlockSize, 2*n))
			copy(fresh, b.buf[start:])
			b.buf, start = fresh, 0
		}
		b.buf = append(b.buf, Update{})
		scanUpdate(s, &b.buf[len(b.buf)-1])
	}
	if len(b.buf) == start {
		return []Update{}
	}
	return b.buf[start:len(b.buf):len(b.buf)]
}

func scanUpdate(s *jsonscan.Scanner, u *Update) {
	if s.Null() {
		return
	}
	o, ok := s.Object()
	if !ok {
		s.Fail()
		return
	}
	for o.Next() {
		switch o.Field(updateFields) {
		case 0:
			s.String(&u.Package)
		case 1:
			s.String(&u.PackageName)
		case 2:
			s.String(&u.EVRA)
		case 3:
			s.String(&u.Erratum)
		case 4:
			s.String(&u.Repository)
		case 5:
			s.String(&u.Basearch)
		case 6:
			s.String(&u.Releasever)
		default:
			s.Skip()
		}
	}
}

// scanStrings reads a []string: nil for null, non-nil and empty for [].
func scanStrings(s *jsonscan.Scanner) []string {
	if s.Null() {
		return nil
	}
	a, ok := s.Array()
	if !ok {
		s.Fail()
		return nil
	}
	out := []string{}
	for a.Next() {
		out = append(out, "")
		s.String(&out[len(out)-1])
	}
	return out
}

// appendRequest appends req as json.Marshal encodes it.
func appendRequest(b []byte, req *UpdatesRequest) []byte {
	b = append(b, `{"package_list":`...)
	b = appendStrings(b, req.PackageList)
	if len(req.RepositoryList) > 0 {
		b = append(b, `,"repository_list":`...)
		b = appendStrings(b, req.RepositoryList)
	}
	if len(req.ModulesList) > 0 {
		b = append(b, `,"modules_list":[`...)
		for i, m := range req.ModulesList {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"module_name":`...)
			b = appendString(b, m.Name)
			b = append(b, `,"module_stream":`...)
			b = appendString(b, m.Stream)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if req.Releasever != "" {
		b = append(b, `,"releasever":`...)
		b = appendString(b, req.Releasever)
	}
	if req.Basearch != "" {
		b = append(b, `,"basearch":`...)
		b = appendString(b, req.Basearch)
	}
	b = append(b, `,"security_only":`...)
	b = strconv.AppendBool(b, req.SecurityOnly)
	b = append(b, `,"latest_only":`...)
	b = strconv.AppendBool(b, req.LatestOnly)
	b = append(b, `,"third_party":`...)
	b = strconv.AppendBool(b, req.ThirdParty)
	b = append(b, `,"epoch_required":`...)
	b = strconv.AppendBool(b, req.EpochRequired)
	return append(b, '}')
}

func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s quoted as json.Marshal quotes it. Printable ASCII
// other than the quote, the backslash and <, > and & (which json.Marshal
// escapes for HTML) is written as it is; a string with anything else is
// left to json.Marshal, for its exact escapes.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
