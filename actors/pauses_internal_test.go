package actors

import (
	"context"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Pauses against a model: a topic may be admitted exactly when it is not
// paused by name and not everything is paused; Resume of none clears both;
// a waiter on a paused topic is woken by every Resume and returns once its
// topic may be admitted.
func TestPausesMatchTheModel(t *testing.T) {
	topics := []string{"a", "b", "c"}
	rapid.Check(t, func(t *rapid.T) {
		var p Pauses
		named, all := map[string]bool{}, false
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			some := rapid.SliceOfDistinct(rapid.SampledFrom(topics), rapid.ID).Draw(t, "topics")
			if rapid.Bool().Draw(t, "pause") {
				p.Pause(some...)
				if len(some) == 0 {
					all = true
				}
				for _, x := range some {
					named[x] = true
				}
			} else {
				p.Resume(some...)
				if len(some) == 0 {
					all, named = false, map[string]bool{}
				}
				for _, x := range some {
					delete(named, x)
				}
			}
			for _, x := range topics {
				if got, want := p.wake(x) == nil, !all && !named[x]; got != want {
					t.Fatalf("topic %s admitted %v, the model says %v (all %v, named %v)", x, got, want, all, named)
				}
			}
			gotNamed, gotAll := p.Paused()
			var wantNamed []string
			for x := range named {
				wantNamed = append(wantNamed, x)
			}
			slices.Sort(wantNamed)
			if gotAll != all || !slices.Equal(gotNamed, wantNamed) {
				t.Fatalf("Paused() = %v, %v; the model %v, %v", gotNamed, gotAll, wantNamed, all)
			}
		}
	})
}

// A claim waiting on a paused topic goes on at the Resume that admits it,
// not at one that does not; its end ends the wait.
func TestAPausedClaimWaitsForItsResume(t *testing.T) {
	var p Pauses
	p.Pause()    // everything
	p.Pause("a") // and a by name
	done := make(chan bool, 1)
	stopped, ended := make(chan struct{}), make(chan struct{})
	marks := make(chan bool, 8)
	go func() { done <- p.wait(context.Background(), "a", func(on bool) { marks <- on }, stopped, ended) }()
	if on := <-marks; !on {
		t.Fatal("the wait did not mark the claim paused")
	}
	p.Resume("a") // a stays paused: everything is
	if on := <-marks; !on {
		t.Fatal("a resumed by name while everything is paused went on")
	}
	select { // it marked itself paused again: it looked, and waits on
	case <-done:
		t.Fatal("the wait ended while its topic was still paused")
	default:
	}
	p.Resume()
	if ok := <-done; !ok {
		t.Fatal("the wait failed at the resume")
	}
	if on := <-marks; on {
		t.Fatal("the claim is still marked paused")
	}

	p.Pause("b")
	go func() { done <- p.wait(context.Background(), "b", func(bool) {}, stopped, ended) }()
	close(ended)
	if ok := <-done; ok {
		t.Fatal("the claim's end did not end its wait")
	}
}
