package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/patchflow/patchflow/proving/platform"
)

// Render returns the message value of item.
func Render(ds *platform.Dataset, o Options, item Item) ([]byte, error) {
	if item.Skip != "" {
		return renderSkip(ds, o, item)
	}
	if item.Bad == "" {
		return ds.Event(item.Event, o.Shape)
	}
	spec := item.Event
	spec.Bulk = false
	if item.Bad == BadFutureTime {
		// Far past any listener's allowed clock skew, and still a time
		// RFC 3339 can write (with the culled timestamp, 14 days on).
		spec.Timestamp = spec.Timestamp.AddDate(100, 0, 0)
	}
	body, err := ds.Event(spec, platform.ProfileShape{Packages: 20, Repos: 5})
	if err != nil {
		return nil, err
	}
	switch item.Bad {
	case BadMalformedJSON:
		return body[:len(body)/2], nil // truncated
	case BadTooLarge:
		pad := bytes.Repeat([]byte("x"), o.TooLargeBytes)
		return append(append([]byte(`{"type":"updated","padding":"`), pad...), []byte(`"}`)...), nil
	case BadUnknownType:
		return bytes.Replace(body, []byte(`"type":"created"`), []byte(`"type":"merged"`), 1), nil
	case BadMissingHostID:
		return mutate(body, func(m map[string]any) { host(m)["id"] = "not-a-uuid" })
	case BadMissingOrgID:
		return mutate(body, func(m map[string]any) { delete(host(m), "org_id") })
	case BadUnparsablePkg:
		return mutate(body, func(m map[string]any) {
			pk := profile(m)["installed_packages"].([]any)
			pk[len(pk)/2] = strings.Repeat("garbage", 3)
		})
	case BadFutureTime:
		return body, nil
	}
	return nil, fmt.Errorf("unknown bad kind %q", item.Bad)
}

// renderSkip renders a valid event the listener skips, shaped like the
// stream's good events.
func renderSkip(ds *platform.Dataset, o Options, item Item) ([]byte, error) {
	spec := item.Event
	spec.Bulk = o.Bulk
	switch item.Skip {
	case SkipReporter:
		spec.Reporter = "unknown-reporter"
	case SkipHostType:
		spec.HostType = "edge"
	case SkipNoPackages:
		body, err := ds.Event(spec, o.Shape)
		if err != nil {
			return nil, err
		}
		return mutate(body, func(m map[string]any) { profile(m)["installed_packages"] = []string{} })
	default:
		return nil, fmt.Errorf("unknown skip kind %q", item.Skip)
	}
	return ds.Event(spec, o.Shape)
}

func host(m map[string]any) map[string]any    { return m["host"].(map[string]any) }
func profile(m map[string]any) map[string]any { return host(m)["system_profile"].(map[string]any) }

func mutate(body []byte, f func(map[string]any)) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	f(m)
	return json.Marshal(m)
}
