package bench

import (
	"testing"
	"time"
)

func TestLoadAverageIsReadAndSummed(t *testing.T) {
	if v, err := parseLoadAverage("18.44 15.93 13.69 9/812 43110\n"); err != nil || v != 18.44 {
		t.Fatalf("parsed %v, %v", v, err)
	}
	if _, err := parseLoadAverage(""); err == nil {
		t.Fatal("an empty load average was accepted")
	}
	// One sample as sampling starts and one as it stops, whatever the interval.
	l := SampleLoad(time.Hour)()
	if l == nil || l.Samples != 2 || l.Max < l.Mean || l.Mean < 0 {
		t.Fatalf("load %+v", l)
	}
}
