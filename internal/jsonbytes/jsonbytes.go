// Package jsonbytes is padfs's one escaping of byte strings in JSON.
//
// Names, paths and symlink targets are bytes; JSON strings are Unicode.
// A string field that holds bytes keeps its name and carries the text with
// every byte that is not part of valid UTF-8 replaced by U+FFFD (what
// encoding/json writes), and, only when there were such bytes, a sibling
// field named <field>_b64 carries the exact bytes in standard, padded
// base64:
//
//	{"path":"a\ufffdb","path_b64":"Yf5i"}    the name a\xfeb
//	{"path":"notes.txt"}                     valid UTF-8: no sibling
//
// A reader that wants the bytes takes <field>_b64 when present, else
// <field> (jq: .path_b64 // empty | @base64d).
package jsonbytes

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// B64 returns the <field>_b64 value for s: its bytes in base64 when s is not
// valid UTF-8, else "" (leave the sibling out: omitempty).
func B64(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// Decode returns the bytes a field and its _b64 sibling stand for.
func Decode(text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%q is not base64: %v", b64, err)
	}
	return string(b), nil
}

// B64s is B64 for an array field: nil when every element is valid UTF-8,
// else the base64 of every element (so an empty element is unambiguous).
func B64s(ss []string) []string {
	bad := false
	for _, s := range ss {
		if !utf8.ValidString(s) {
			bad = true
			break
		}
	}
	if !bad {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	return out
}

// DecodeStrings is Decode for an array field and its _b64 sibling, which
// must then have one element per element of the field.
func DecodeStrings(text, b64 []string) ([]string, error) {
	if b64 == nil {
		return text, nil
	}
	if len(b64) != len(text) {
		return nil, fmt.Errorf("%d base64 elements for %d strings", len(b64), len(text))
	}
	out := make([]string, len(b64))
	for i, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("element %d: %q is not base64: %v", i, s, err)
		}
		out[i] = string(b)
	}
	return out, nil
}
