// Package testtrees finds the small source trees that tests share,
// kept in the module's testdata/trees/NAME, so that no test writes them
// ad hoc.
package testtrees

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir returns the absolute path of tree name: testdata/trees/name in the
// module root.
func Dir(name string) (string, error) {
	return Testdata(filepath.Join("trees", name))
}

// Testdata returns the absolute path of testdata/rel in the module root,
// found from the working directory (a test runs in its package's
// directory) up to the directory holding go.mod.
func Testdata(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "testdata", rel)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("testdata %s: %w", rel, err)
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("testdata %s: no go.mod above the working directory", rel)
		}
		dir = up
	}
}

// Files returns the regular files of tree name, by slash-separated path
// relative to it.
func Files(name string) (map[string]string, error) {
	return FilesUnder(filepath.Join("trees", name))
}

// FilesUnder returns the regular files below testdata/rel, by
// slash-separated path relative to it.
func FilesUnder(rel string) (map[string]string, error) {
	root, err := Testdata(rel)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testdata %s: %w", rel, err)
	}
	return out, nil
}
