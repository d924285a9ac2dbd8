package e2e

import "testing"

// The check finds what fmt prints for a value it cannot format, as the
// status page once printed a pointer, and nothing in a sound page.
func TestBadVerbFindsUnformattedValues(t *testing.T) {
	for page, want := range map[string]bool{
		`<td>3 / 64, waiting %!f(*float64=0x44b4a7c1e40) s for a credit</td>`: true,
		`<td>%!d(string=x)</td>`:                                 true,
		`<td>3 / 64, waiting 2 s for a credit</td><td>100%</td>`: false,
	} {
		if got := badVerb.MatchString(page); got != want {
			t.Errorf("%s: found %v, want %v", page, got, want)
		}
	}
}
