package search

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/trigram"
)

func sampleMsgs() []*msg {
	sid := mvcc.SessionID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []*msg{
		{Op: opCovered, ID: 7, Sid: sid},
		{Op: opDoc, Sid: sid, Path: "a/b.go", Ino: 42, HasData: true, Data: []byte("package b\n")},
		{Op: opDoc, Sid: sid, Path: "empty", HasData: true, Data: []byte{}},
		{Op: opDoc, Sid: sid, Path: "huge", Ino: 3},
		{Op: opIDs, ID: 1 << 40, Sid: sid, Q: &trigram.Query{Op: trigram.And, Trigram: []string{"abc", "bcd"},
			Sub: []*trigram.Query{{Op: trigram.Or, Trigram: []string{"xyz"}}, {Op: trigram.None}}}},
		{Op: opReply, ID: 3, Seq: 99, HLC: 1 << 60, Strs: []string{"a", "", "b"}, Floats: []float64{1.5, 0, -2}, Err: "boom"},
		{Op: opBegin, N: 2, N2: 32 << 20, N3: 2000},
		{Op: opReply, ID: 4, Stats: &workerStats{Indexed: 12345, QueryPolicy: 5, IdleRankers: 3, MemLimit: 1<<63 - 1}},
		{Op: opReply, ID: 5, Stats: &workerStats{MemLimit: -1}},
	}
}

// TestFrameRoundTrip: every message comes back as it was sent, and a
// flipped byte anywhere in a frame is an error.
func TestFrameRoundTrip(t *testing.T) {
	for _, m := range sampleMsgs() {
		var buf bytes.Buffer
		if _, err := writeFrame(&buf, m, nil); err != nil {
			t.Fatal(err)
		}
		frame := append([]byte(nil), buf.Bytes()...)
		got, err := readFrame(&buf)
		if err != nil {
			t.Fatalf("op %d: %v", m.Op, err)
		}
		if !reflect.DeepEqual(normal(got), normal(m)) {
			t.Fatalf("op %d: got %+v, want %+v", m.Op, got, m)
		}
		for i := range frame {
			bad := append([]byte(nil), frame...)
			bad[i] ^= 0x40
			if _, err := readFrame(bytes.NewReader(bad)); err == nil && i >= 4 {
				t.Fatalf("op %d: byte %d flipped, frame still decoded", m.Op, i)
			}
		}
	}
}

// normal makes empty and nil slices compare equal (as the decoder sees
// them).
func normal(m *msg) *msg {
	c := *m
	if len(c.Strs) == 0 {
		c.Strs = nil
	}
	if len(c.Floats) == 0 {
		c.Floats = nil
	}
	if !c.HasData {
		c.Data = nil
	} else if c.Data == nil {
		c.Data = []byte{}
	}
	return &c
}

// FuzzDecodeMsg: the decoder never panics, and what it accepts encodes
// back to the same bytes.
func FuzzDecodeMsg(f *testing.F) {
	for _, m := range sampleMsgs() {
		f.Add(encodeMsg(nil, m))
	}
	f.Add([]byte{opIDs, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := decodeMsg(p)
		if err != nil {
			return
		}
		if again := encodeMsg(nil, m); !bytes.Equal(again, p) {
			// Uvarints have non-minimal encodings: the re-encoding must be
			// a fixed point (comparing decoded values would fail on NaN).
			m2, err := decodeMsg(again)
			if err != nil || !bytes.Equal(encodeMsg(nil, m2), again) {
				t.Fatalf("re-encoded message differs: %+v vs %+v (%v)", m2, m, err)
			}
		}
	})
}
