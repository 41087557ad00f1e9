package codetok

import (
	"bytes"
	"path"
	"strings"
)

// Lang is a language family whose declarations Decls knows.
type Lang int

const (
	LangNone Lang = iota
	LangGo
	LangGoAsm
	LangPython
	LangJS // JavaScript and TypeScript
	LangRust
	LangC // C and C++
	LangJava
	LangShell
	LangMarkdown
)

var langs = map[string]Lang{
	".go": LangGo, ".s": LangGoAsm,
	".py": LangPython, ".pyi": LangPython,
	".js": LangJS, ".mjs": LangJS, ".cjs": LangJS, ".jsx": LangJS, ".ts": LangJS, ".tsx": LangJS, ".mts": LangJS,
	".rs": LangRust,
	".c":  LangC, ".h": LangC, ".cc": LangC, ".cpp": LangC, ".cxx": LangC, ".hpp": LangC, ".hh": LangC, ".hxx": LangC, ".m": LangC,
	".java": LangJava, ".kt": LangJava, ".scala": LangJava, ".cs": LangJava,
	".sh": LangShell, ".bash": LangShell, ".zsh": LangShell, ".rc": LangShell,
	".md": LangMarkdown, ".markdown": LangMarkdown,
}

// LangOf picks the language of a file by its name's extension.
func LangOf(name string) Lang {
	base := path.Base(name)
	if base == "Makefile" || strings.HasPrefix(base, "make.") {
		return LangShell
	}
	return langs[strings.ToLower(path.Ext(base))]
}

// MaxDecls bounds the declarations taken from one file.
const MaxDecls = 4096

// Decls returns the names file name declares (functions, methods, types,
// classes, top-level constants and variables; Markdown headings whole),
// found by cheap lexical rules per language: a line-oriented scan, no
// parse, so it is fast and never fails, and sometimes wrong at the edges
// (a declaration in a string, a macro). Each name is a substring of data.
func Decls(name string, data []byte) []string {
	lang := LangOf(name)
	if lang == LangNone {
		return nil
	}
	var out []string
	add := func(b []byte) {
		if len(b) > 0 && len(out) < MaxDecls {
			out = append(out, string(b))
		}
	}
	inBlock := false // Go: inside a type/const/var ( ... ) group
	for len(data) > 0 && len(out) < MaxDecls {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		indented := len(line) > 0 && (line[0] == ' ' || line[0] == '\t')
		if indented && lang == LangGo && !inBlock {
			continue // a function's body: most of a Go file's lines
		}
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		switch lang {
		case LangGo:
			if inBlock {
				if t[0] == ')' && !indented {
					inBlock = false
				} else if indented && !bytes.HasPrefix(t, []byte("//")) {
					add(ident(t))
				}
				continue
			}
			if indented {
				continue
			}
			if r, ok := cut(t, "func "); ok {
				if len(r) > 0 && r[0] == '(' { // method: skip the receiver
					if j := bytes.IndexByte(r, ')'); j >= 0 {
						r = bytes.TrimSpace(r[j+1:])
					}
				}
				add(ident(r))
				continue
			}
			for _, kw := range []string{"type ", "const ", "var "} {
				if r, ok := cut(t, kw); ok {
					if bytes.HasPrefix(r, []byte("(")) {
						inBlock = true
					} else {
						add(ident(r))
					}
					break
				}
			}
		case LangGoAsm:
			// TEXT ·name(SB), or TEXT runtime·name(SB)
			if r, ok := cut(t, "TEXT"); ok {
				if j := bytes.LastIndex(r, []byte("·")); j >= 0 {
					r = r[j+len("·"):]
				}
				add(ident(r))
			}
		case LangPython:
			r := trimWords(t, "async")
			for _, kw := range []string{"def ", "class "} {
				if r, ok := cut(r, kw); ok {
					add(ident(r))
				}
			}
		case LangJS:
			r := trimWords(t, "export", "default", "declare", "abstract", "async", "public", "private", "protected", "static", "readonly")
			found := false
			for _, kw := range []string{"function* ", "function ", "class ", "interface ", "enum ", "type ", "namespace "} {
				if r, ok := cut(r, kw); ok {
					add(ident(r))
					found = true
					break
				}
			}
			if !found && !indented {
				for _, kw := range []string{"const ", "let ", "var "} {
					if r, ok := cut(r, kw); ok {
						add(ident(r))
						break
					}
				}
			}
		case LangRust:
			r := trimWords(t, "pub", "pub(crate)", "pub(super)", "async", "unsafe", "const", "extern", `"C"`, "default")
			for _, kw := range []string{"fn ", "struct ", "enum ", "trait ", "mod ", "type ", "union ", "static ", "macro_rules! "} {
				if r, ok := cut(r, kw); ok {
					add(ident(r))
					break
				}
			}
			if r, ok := cut(r, "impl"); ok {
				// impl<T> Name for Other: the name after generics.
				r = bytes.TrimSpace(skipGenerics(r))
				add(ident(r))
			}
			if r, ok := cut(t, "const "); ok {
				add(ident(r))
			}
		case LangC:
			if r, ok := cut(t, "#define "); ok {
				add(ident(bytes.TrimSpace(r)))
				continue
			}
			if t[0] == '#' || indented || t[0] == '}' || t[0] == '/' || t[0] == '*' {
				continue
			}
			r := trimWords(t, "typedef", "static", "extern", "inline", "export")
			kwFound := false
			for _, kw := range []string{"struct ", "class ", "enum ", "union ", "namespace "} {
				if r, ok := cut(r, kw); ok {
					if id := ident(r); len(id) > 0 && !bytes.ContainsAny(t, "(") {
						add(id)
						kwFound = true
					}
					break
				}
			}
			if kwFound {
				continue
			}
			// A function definition starts at column 0: the identifier
			// before the first '(' of a line that does not end in ';'.
			if j := bytes.IndexByte(t, '('); j > 0 && t[len(t)-1] != ';' {
				add(lastIdent(t[:j]))
			}
		case LangJava:
			r := trimWords(t, "public", "private", "protected", "static", "final", "abstract", "sealed", "open", "data", "internal", "override", "suspend", "inline", "synchronized", "native", "default")
			found := false
			for _, kw := range []string{"class ", "interface ", "enum ", "record ", "object ", "fun ", "@interface "} {
				if r, ok := cut(r, kw); ok {
					add(ident(r))
					found = true
					break
				}
			}
			// A method: modifiers, a type, name( ... and not a call
			// statement (those end in ';').
			if !found && len(r) < len(t) {
				if j := bytes.IndexByte(r, '('); j > 0 && t[len(t)-1] != ';' && !bytes.Contains(r[:j], []byte("=")) {
					add(lastIdent(r[:j]))
				}
			}
		case LangShell:
			if r, ok := cut(t, "function "); ok {
				add(ident(r))
			} else if j := bytes.Index(t, []byte("()")); j > 0 && !indented {
				if id := ident(t); len(id) == j {
					add(id)
				}
			} else if !indented {
				// make targets: name: deps
				if j := bytes.IndexByte(t, ':'); j > 0 && !bytes.ContainsAny(t[:j], " \t=$") {
					add(ident(t[:j]))
				}
			}
		case LangMarkdown:
			if t[0] == '#' && !indented {
				add(bytes.TrimSpace(bytes.TrimLeft(t, "#")))
			}
		}
	}
	return out
}

// cut returns what follows prefix kw in t (spaces trimmed).
func cut(t []byte, kw string) ([]byte, bool) {
	if !bytes.HasPrefix(t, []byte(kw)) {
		return nil, false
	}
	return bytes.TrimLeft(t[len(kw):], " \t"), true
}

// trimWords strips leading modifier words of t.
func trimWords(t []byte, words ...string) []byte {
	for again := true; again; {
		again = false
		for _, w := range words {
			if len(t) > len(w) && bytes.HasPrefix(t, []byte(w)) && (t[len(w)] == ' ' || t[len(w)] == '\t') {
				t = bytes.TrimLeft(t[len(w):], " \t")
				again = true
			}
		}
	}
	return t
}

// skipGenerics skips a leading <...> (balanced) of b.
func skipGenerics(b []byte) []byte {
	b = bytes.TrimLeft(b, " \t")
	if len(b) == 0 || b[0] != '<' {
		return b
	}
	depth := 0
	for i, c := range b {
		switch c {
		case '<':
			depth++
		case '>':
			if depth--; depth == 0 {
				return b[i+1:]
			}
		}
	}
	return nil
}

// ident is the identifier at the start of b ('$' and '_' included).
func ident(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, n := decode(b[i:])
		if !isWord(r) && r != '_' && r != '$' {
			break
		}
		i += n
	}
	return b[:i]
}

// lastIdent is the identifier at the end of b (spaces, '*' and '&'
// trimmed: C's "char *name").
func lastIdent(b []byte) []byte {
	b = bytes.TrimRight(b, " \t")
	i := len(b)
	for i > 0 {
		c := b[i-1]
		if c < 0x80 && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == ':' || c == '~') {
			break
		}
		i--
	}
	return bytes.TrimLeft(b[i:], ":")
}
