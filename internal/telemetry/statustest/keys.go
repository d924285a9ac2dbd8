// Package statustest holds what tests of /status.json share: a check of
// its naming style. Only tests import it.
package statustest

import (
	"regexp"
	"strings"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// dataKeyed are the objects of /status.json whose keys are data (skip and
// dead-letter reasons), not names of the format.
var dataKeyed = map[string]bool{"totals.skipped_by_reason": true, "totals.dead_lettered_by_reason": true,
	"totals.by_topic.*.skipped_by_reason": true, "totals.by_topic.*.dead_lettered_by_reason": true}

// dataKeyedObjects are the objects whose keys are data (topics) and whose
// values are objects of the format, checked under the path's "*".
var dataKeyedObjects = map[string]bool{"totals.by_topic": true}

// NonSnakeKeys returns the path of every key of the decoded JSON value v
// (of /status.json), at any depth, that is not snake_case.
func NonSnakeKeys(v any) []string { return nonSnakeKeys("", v) }

func nonSnakeKeys(path string, v any) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := strings.TrimPrefix(path+"."+k, ".")
			if dataKeyedObjects[path] {
				p = path + ".*"
			} else if !snakeCase.MatchString(k) {
				bad = append(bad, p)
			}
			if !dataKeyed[p] {
				bad = append(bad, nonSnakeKeys(p, e)...)
			}
		}
	case []any:
		for _, e := range v {
			bad = append(bad, nonSnakeKeys(path+"[]", e)...)
		}
	}
	return bad
}
