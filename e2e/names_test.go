package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestNonUTF8Names: Linux names are bytes. Files, directories and symlink
// targets whose bytes are not valid UTF-8 are created, read, renamed and
// removed with the real tools, and every padfs command that shows them
// (session ls, log, log --json, diff, grep, .asof/) succeeds and shows
// the right bytes: raw in text output, as GNU tools print them; in JSON, the
// field with U+FFFD plus a <field>_b64 sibling holding the raw bytes.
func TestNonUTF8Names(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "names")
	startMount(t, data, mnt, "--session", sid)

	t0 := mustPadfs(t, data, "now")
	sh(t, data, mnt, `
touch $'\xff'
mkdir $'a\xfeb'
ln -s $'\xfd' l
printf 'needle\n' > $'a\xfeb/f\xfc'
test "$(readlink l)" = $'\xfd'
test "$(cat $'a\xfeb/f\xfc')" = needle
mv $'\xff' $'a\xfeb/\xfb'
`)
	if got := sh(t, data, mnt, `ls -a | od -An -c | tr -s ' '`); !strings.Contains(got, "a 376 b") || !strings.Contains(got, "l") {
		t.Errorf("ls of the root (od -c): %q, want a\\376b and l", got)
	}
	if got := sh(t, data, mnt, `ls $'a\xfeb'`); got != "f\xfc\n\xfb\n" {
		t.Errorf("ls a\\xfeb = %q", got)
	}
	t1 := mustPadfs(t, data, "now")
	sh(t, data, mnt, `rm $'a\xfeb/\xfb'; test ! -e $'a\xfeb/\xfb'`)

	if r := padfs(t, data, "session", "ls"); r.code != 0 || !strings.Contains(r.out, "names") {
		t.Errorf("session ls: exit %d: %q %q", r.code, r.out, r.errout)
	}
	sh(t, data, mnt, `padfs session ls --json | jq -e '.[] | select(.name=="names") | .files == 2' >/dev/null`)

	// padfs log: raw bytes, as ls or find print them to a pipe.
	log := mustPadfs(t, data, "log")
	for _, want := range []string{"\xff", "a\xfeb", "a\xfeb/f\xfc", "\xfd", "a\xfeb/\xfb"} {
		if !strings.Contains(log, want) {
			t.Errorf("padfs log lacks %q:\n%s", want, log)
		}
	}
	// padfs log --json: valid JSON (jq reads it), path_b64 carries the bytes.
	got := sh(t, data, mnt, `padfs log --json | jq -r 'select(.op=="rename") | .path_b64, .to_b64' | while read b; do printf '%s' "$b" | base64 -d; echo; done`)
	if got != "\xff\na\xfeb/\xfb\n" {
		t.Errorf("log --json rename path_b64/to_b64 = %q", got)
	}
	got = sh(t, data, mnt, `padfs log --json | jq -r 'select(.op=="symlink") | .to_b64' | base64 -d`)
	if got != "\xfd" {
		t.Errorf("log --json symlink to_b64 = %q", got)
	}
	// .log/events.jsonl: the same lines.
	sh(t, data, mnt, `jq -s -e 'any(.[]; .op=="mkdir" and .path == "a\ufffdb" and .path_b64 == "Yf5i")' .log/events.jsonl >/dev/null`)
	// ASCII names get no _b64 field.
	sh(t, data, mnt, `padfs log --json | jq -s -e 'map(select(.path=="l")) | length == 1 and (.[0] | has("path_b64") | not)' >/dev/null`)

	// padfs diff.
	if got := mustPadfs(t, data, "diff", t0, t1); !strings.Contains(got, "a\xfeb/\xfb") || !strings.Contains(got, "a\xfeb/f\xfc") {
		t.Errorf("diff %s %s:\n%s", t0, t1, got)
	}
	moved := base64.StdEncoding.EncodeToString([]byte("a\xfeb/\xfb"))
	sh(t, data, mnt, `padfs diff --json `+t0+` `+t1+` | jq -e 'any(.[]; .status == "A" and .path_b64 == "`+moved+`" and .path == "a\ufffdb/\ufffd")' >/dev/null`)

	// padfs grep prints what GNU grep -r prints, bytes and all, also with a
	// bad-bytes path as its argument (argv and cwd cross the control socket).
	if got, want := sh(t, data, mnt, `padfs grep -rn needle . | sort`), sh(t, data, mnt, `grep -rn needle . | sort`); got != want {
		t.Errorf("padfs grep -rn = %q, grep -rn = %q", got, want)
	}
	if got, want := sh(t, data, mnt, `padfs grep -rn needle $'a\xfeb'`), sh(t, data, mnt, `grep -rn needle $'a\xfeb'`); got != want || got == "" {
		t.Errorf("padfs grep -rn needle a\\xfeb = %q, grep = %q", got, want)
	}
	if got, want := sh(t, data, mnt, `cd $'a\xfeb' && padfs grep -n needle $'f\xfc'`), "1:needle\n"; got != want {
		t.Errorf("in a\\xfeb: padfs grep -n needle f\\xfc = %q, want %q", got, want)
	}
	if got := sh(t, data, mnt, `padfs log $'a\xfeb/f\xfc'`); !strings.Contains(got, "a\xfeb/f\xfc") {
		t.Errorf("padfs log a\\xfeb/f\\xfc = %q", got)
	}

	// padfs search: raw bytes in text, path_b64 in JSON.
	if got := sh(t, data, mnt, `padfs search needle`); !strings.Contains(got, "a\xfeb/f\xfc:1: needle") {
		t.Errorf("padfs search needle = %q", got)
	}
	found := base64.StdEncoding.EncodeToString([]byte("a\xfeb/f\xfc"))
	sh(t, data, mnt, `padfs search --json needle | jq -s -e 'length == 1 and .[0].path_b64 == "`+found+`"' >/dev/null`)

	// The past: .asof/ shows the names and their bytes.
	if got := sh(t, data, mnt, `ls .asof/`+t1+`/$'a\xfeb'`); got != "f\xfc\n\xfb\n" {
		t.Errorf("ls .asof/%s/a\\xfeb = %q", t1, got)
	}
	if got := sh(t, data, mnt, `readlink .asof/`+t1+`/l`); got != "\xfd\n" {
		t.Errorf("readlink .asof/%s/l = %q", t1, got)
	}
}

// TestSessionNamesAtMountRoot: at the root of a mount of all sessions,
// mkdir names a session; a name that is not UTF-8 works (session ls shows
// its bytes, --json adds name_b64), a name with a control character is
// refused and creates nothing.
func TestSessionNamesAtMountRoot(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	startMount(t, data, mnt)
	sh(t, data, mnt, `mkdir $'s\xff' && touch $'s\xff/f\xfe' && ls $'s\xff' | grep -qx $'f\xfe'`)
	if r := shResult(t, data, mnt, `mkdir $'two\nlines'`); r.code == 0 || !strings.Contains(r.errout, "Invalid argument") {
		t.Errorf("mkdir of a session name with a newline: exit %d %q, want EINVAL", r.code, r.errout)
	}
	if got := mustPadfs(t, data, "session", "ls"); !strings.Contains(got, "s\xff") || strings.Contains(got, "two") {
		t.Errorf("session ls:\n%s", got)
	}
	sh(t, data, mnt, `padfs session ls --json | jq -e 'length == 1 and .[0].name_b64 == "c/8=" and .[0].files == 1' >/dev/null`)
	if r := padfs(t, data, "session", "new", "--name", "x\x1by"); r.code != 2 || !strings.Contains(r.errout, "control character") {
		t.Errorf("session new with ESC in the name: exit %d %q", r.code, r.errout)
	}
}
