package jsonbytes

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

type row struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
}

// roundTrip encodes s as a field and its sibling, and decodes it back.
func roundTrip(t *testing.T, s string) (string, row) {
	b, err := json.Marshal(row{Path: s, PathB64: B64(s)})
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Fatalf("%q: JSON %q is not UTF-8", s, b)
	}
	var r row
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	got, err := Decode(r.Path, r.PathB64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return got, r
}

func TestEscaping(t *testing.T) {
	for _, c := range []struct{ in, text, b64 string }{
		{"notes.txt", "notes.txt", ""},
		{"", "", ""},
		{"caf\u00e9", "caf\u00e9", ""},
		{"\xff", "\ufffd", "/w=="},
		{"a\xfeb", "a\ufffdb", "Yf5i"},
		{"\xe2\x82", "\ufffd\ufffd", "4oI="}, // a cut-off rune: one U+FFFD per byte, as encoding/json
	} {
		got, r := roundTrip(t, c.in)
		if got != c.in || r.Path != c.text || r.PathB64 != c.b64 {
			t.Errorf("%q: field %q b64 %q decoded %q; want field %q b64 %q", c.in, r.Path, r.PathB64, got, c.text, c.b64)
		}
	}
	if _, err := Decode("x", "not base64!"); err == nil {
		t.Error("Decode accepted bad base64")
	}
}

func TestStrings(t *testing.T) {
	if B64s([]string{"grep", "-rn", "x"}) != nil {
		t.Error("B64s of valid UTF-8 is not nil")
	}
	in := []string{"grep", "", "a\xfeb"}
	got, err := DecodeStrings([]string{"grep", "", "a\ufffdb"}, B64s(in))
	if err != nil || len(got) != 3 || got[0] != "grep" || got[1] != "" || got[2] != "a\xfeb" {
		t.Errorf("DecodeStrings = %q, %v", got, err)
	}
	if _, err := DecodeStrings([]string{"a"}, []string{"YQ==", "Yg=="}); err == nil {
		t.Error("DecodeStrings accepted a length mismatch")
	}
}

// FuzzEscaping: any bytes survive the field + _b64 pair exactly, the JSON
// is valid UTF-8, and the sibling appears only for bytes that need it.
func FuzzEscaping(f *testing.F) {
	for _, s := range []string{"", "a", "\xff", "a\xfeb/\xfd", "caf\u00e9", "\xe2\x82", "\x00\n\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, r := roundTrip(t, s)
		if got != s {
			t.Fatalf("%q came back as %q", s, got)
		}
		if (r.PathB64 != "") == utf8.ValidString(s) {
			t.Fatalf("%q: b64 %q, valid UTF-8 %v", s, r.PathB64, utf8.ValidString(s))
		}
		if utf8.ValidString(s) && r.Path != s {
			t.Fatalf("valid %q: field %q", s, r.Path)
		}
		ss := []string{s, "x", s + "\xff"}
		back, err := DecodeStrings(ss, B64s(ss))
		if err != nil || len(back) != 3 || back[0] != s || back[2] != s+"\xff" {
			t.Fatalf("DecodeStrings(%q) = %q, %v", ss, back, err)
		}
	})
}
