package main

import (
	"encoding/json"
	"testing"
)

// TestMountRequestBytes: session names and mountpoints that are not
// valid UTF-8 reach the serving process byte for byte.
func TestMountRequestBytes(t *testing.T) {
	for _, r := range []mountRequest{
		{Session: "s\xff", Mountpoint: "/tmp/a\xfeb", AsOf: "cp", AllowOther: true},
		{Session: "plain", Mountpoint: "/mnt/pad"},
		{Mountpoint: "/mnt/all", Debug: true},
	} {
		b, err := json.Marshal(ctlRequest{V: ctlVersion, Op: "mount", Mount: r.encode()})
		if err != nil {
			t.Fatal(err)
		}
		req, err := decodeRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		if req.Mount == nil {
			t.Fatalf("%q: no mount in the decoded request", b)
		}
		got := *req.Mount
		if err := got.decode(); err != nil {
			t.Fatal(err)
		}
		if got != r {
			t.Errorf("round trip of %+v gave %+v", r, got)
		}
	}
}
