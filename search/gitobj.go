package search

import (
	"path"
	"strings"
)

// isGitLooseObject reports whether p names a git loose object (or git's
// temporary file for one): objects/XX/ then 38 or 62 hex digits (SHA-1,
// SHA-256) or tmp_obj_*. Its content is a zlib stream: its trigrams (or
// buckets) are thousands of postings per object that no source text
// shares, about 5 ms of the index worker's CPU per object, and `git add`
// of a tree writes one per file. Such files are left unindexed without
// being read: grep always reads them, so its answers stay exact.
func isGitLooseObject(p string) bool {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	dir, fan := path.Split(dir)
	if path.Base(strings.TrimSuffix(dir, "/")) != "objects" || len(fan) != 2 || !isHex(fan) {
		return false
	}
	return (len(name) == 38 || len(name) == 62) && isHex(name) || strings.HasPrefix(name, "tmp_obj_")
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
