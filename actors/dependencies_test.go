package actors

import (
	"testing"
	"time"
)

// A dependency is known once observed; it is serving when it served a call
// after the time asked about and most of its recent calls; its first
// outcome counts alone, whatever the average starts from.
func TestDependenciesServingSince(t *testing.T) {
	var d Dependencies
	before := time.Now().Add(-time.Millisecond)
	if known, _ := d.ServingSince("vmaas", before); known {
		t.Fatal("a dependency never observed is known")
	}
	if known, _ := d.ServingSince(RecordsDependency, before); known {
		t.Fatal("records never observed are known")
	}
	d.Observe("vmaas", true)
	if known, serving := d.ServingSince("vmaas", before); !known || !serving {
		t.Fatalf("after one served call: known %v, serving %v", known, serving)
	}
	if _, serving := d.ServingSince("vmaas", time.Now().Add(time.Second)); serving {
		t.Fatal("serving since a time after its last served call")
	}
	for range 8 { // two calls in three fail: shared trouble
		d.Observe("vmaas", false)
		d.Observe("vmaas", false)
		d.Observe("vmaas", true)
	}
	if _, serving := d.ServingSince("vmaas", before); serving {
		t.Fatal("serving while two calls in three fail")
	}
	d.Observe(RecordsDependency, false)
	if known, serving := d.ServingSince(RecordsDependency, before); !known || serving {
		t.Fatalf("records after one failure: known %v, serving %v", known, serving)
	}
}
