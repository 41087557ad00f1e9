package codetok

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func terms(t *Tokenizer, s string) []string {
	var out []string
	for _, tok := range t.Tokenize([]byte(s)) {
		out = append(out, string(tok.Term))
	}
	return out
}

func TestTokenize(t *testing.T) {
	for _, c := range []struct {
		in          string
		parts, both []string
	}{
		{"readTimeout", []string{"read", "Timeout"}, []string{"read", "Timeout", "readTimeout"}},
		{"HTTPServer", []string{"HTTP", "Server"}, []string{"HTTP", "Server", "HTTPServer"}},
		{"handshake_client.go", []string{"handshake", "client", "go"}, []string{"handshake", "client", "go"}},
		{"regalloc", []string{"regalloc"}, []string{"regalloc"}},
		{"utf8.DecodeRune(b)", []string{"utf", "Decode", "Rune"}, []string{"utf", "utf8", "Decode", "Rune", "DecodeRune"}},
		{"x := parseHTTP2Frame", []string{"parse", "HTTP", "Frame"}, []string{"parse", "HTTP", "Frame", "parseHTTP2Frame"}},
		{"Größe straße", []string{"Größe", "straße"}, []string{"Größe", "straße"}},
		{"a b c", nil, nil},
		{strings.Repeat("ab", MaxWord) + " ok", []string{"ok"}, []string{"ok"}},
	} {
		if got := terms(&Tokenizer{}, c.in); !reflect.DeepEqual(got, c.parts) {
			t.Errorf("parts of %q = %q, want %q", c.in, got, c.parts)
		}
		if got := terms(&Tokenizer{Whole: true}, c.in); !reflect.DeepEqual(got, c.both) {
			t.Errorf("words of %q = %q, want %q", c.in, got, c.both)
		}
	}
}

func TestDecls(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"a.go", "package a\n\n// x\nfunc regalloc(f *Func) {\n\tcall(x)\n}\nfunc (s *state) allocReg(v *Value) int {}\ntype Client struct {\n\tTimeout time.Duration\n}\nconst (\n\tmaxRegs = 64\n\t// c\n\tminRegs\n)\nvar errX = errors.New(\"x\")\n",
			[]string{"regalloc", "allocReg", "Client", "maxRegs", "minRegs", "errX"}},
		{"a.s", "TEXT ·memmove(SB), NOSPLIT, $0-24\nTEXT runtime·rt0_go(SB),NOSPLIT,$0\n", []string{"memmove", "rt0_go"}},
		{"a.py", "class Parser(object):\n    def parse_args(self):\n        pass\nasync def fetch():\n", []string{"Parser", "parse_args", "fetch"}},
		{"a.ts", "export default class Store {}\nexport async function loadConfig(p) {}\nconst maxRetries = 3\ninterface Opts {}\n  const inner = 1\n", []string{"Store", "loadConfig", "maxRetries", "Opts"}},
		{"a.rs", "pub(crate) fn parse_header() {}\npub struct Frame {}\nimpl<T> Decoder for Frame<T> {}\nmacro_rules! try_opt {}\n", []string{"parse_header", "Frame", "Decoder", "try_opt"}},
		{"a.c", "#define MAX_LEN 10\nstatic int\nhash_insert(struct table *t, int k)\n{\n\tfoo(1);\n}\nstruct node {\nint x;\n};\nint decl(void);\n", []string{"MAX_LEN", "hash_insert", "node"}},
		{"A.java", "public class Cache {\n    private static int evictOldest(Map m) {\n        return helper(m);\n    }\n}\n", []string{"Cache", "evictOldest"}},
		{"a.sh", "usage() {\n  echo\n}\nfunction build_all {\n}\n", []string{"usage", "build_all"}},
		{"README.md", "# Ranked search\ntext\n## The --explain flag\n", []string{"Ranked search", "The --explain flag"}},
		{"notes.txt", "func nothing()\n", nil},
	} {
		if got := Decls(c.name, []byte(c.src)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Decls(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}

// checkTokens: every token is a non-empty slice of input at its offsets,
// positions increase by one.
func checkTokens(t *testing.T, tk *Tokenizer, data []byte) {
	toks := tk.Tokenize(data)
	for i, tok := range toks {
		if tok.Start < 0 || tok.End > len(data) || tok.Start >= tok.End {
			t.Fatalf("token %d [%d,%d) out of bounds of %d bytes", i, tok.Start, tok.End, len(data))
		}
		if !bytes.Equal(tok.Term, data[tok.Start:tok.End]) {
			t.Fatalf("token %d term %q is not input[%d:%d]", i, tok.Term, tok.Start, tok.End)
		}
		if tok.Position != i+1 {
			t.Fatalf("token %d position %d", i, tok.Position)
		}
		if len(tok.Term) > MaxWord {
			t.Fatalf("token %d longer than MaxWord", i)
		}
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"readTimeout HTTPServer", "utf8\xff\xfeÉcole", "a_b_c9Z", "ǅǈ \u0301x", "12abcDEF"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkTokens(t, &Tokenizer{}, data)
		checkTokens(t, &Tokenizer{Whole: true}, data)
	})
}

func FuzzDecls(f *testing.F) {
	f.Add("a.go", []byte("func (x) f(\ntype (\n\tA int\n)\n"))
	f.Add("a.rs", []byte("impl<<T> X\npub fn\n"))
	f.Add("a.c", []byte("#define \n(\n*(;\n"))
	f.Add("a.md", []byte("###\n# \xff\n"))
	f.Add("a.s", []byte("TEXT ·(SB)\nTEXT·"))
	f.Add("A.java", []byte("public (\n"))
	f.Add("a.sh", []byte("()\nfunction \n:\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		ds := Decls(name, data)
		if len(ds) > MaxDecls {
			t.Fatalf("%d declarations", len(ds))
		}
		for _, d := range ds {
			if d == "" || !bytes.Contains(data, []byte(d)) {
				t.Fatalf("declaration %q is not part of the input", d)
			}
		}
	})
}
