package mcpadapter

import (
	"errors"
	"fmt"
	"testing"
)

func TestSessionOwners(t *testing.T) {
	var o sessionOwners
	o.claim("s1", "alice")
	o.claim("s1", "bob") // the first to run it keeps it
	o.claim("s2", "")    // no identity: nothing to tell apart
	o.claim("", "alice")
	for _, tc := range []struct {
		sid, identity string
		refused       bool
	}{
		{"s1", "alice", false},
		{"s1", "bob", true},
		{"s1", "", true},
		{"s2", "bob", false},
		{"unknown", "bob", false},
		{"", "bob", false},
	} {
		err := o.check(tc.sid, tc.identity)
		if refused := err != nil; refused != tc.refused || refused && !errors.Is(err, errRefused) {
			t.Errorf("check(%q, %q) = %v, want refused %v", tc.sid, tc.identity, err, tc.refused)
		}
	}
	if len(o.owner) != 1 {
		t.Errorf("%d sessions recorded, want 1 (s1)", len(o.owner))
	}
}

// TestSessionOwnersBounded: past maxOwners sessions the oldest is
// forgotten, one for one.
func TestSessionOwnersBounded(t *testing.T) {
	var o sessionOwners
	for i := range maxOwners + 10 {
		o.claim(fmt.Sprint("s", i), "alice")
	}
	if len(o.owner) != maxOwners || len(o.ring) != maxOwners {
		t.Fatalf("%d sessions recorded in a ring of %d, want %d", len(o.owner), len(o.ring), maxOwners)
	}
	for _, tc := range []struct {
		sid     string
		refused bool
	}{{"s0", false}, {"s9", false}, {"s10", true}, {fmt.Sprint("s", maxOwners+9), true}} {
		if refused := o.check(tc.sid, "bob") != nil; refused != tc.refused {
			t.Errorf("check(%q, bob) refused = %v, want %v", tc.sid, refused, tc.refused)
		}
	}
}
