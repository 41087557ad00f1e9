// Package grep is padfs's GNU grep 3.8 clone: what a file's bytes give
// under a grep command line, byte for byte as GNU grep prints it in a
// UTF-8 locale. It knows nothing of the store or the index; search runs
// it over a session's files.
//
//	args.go      the command line (ParseCommandLine) and .grep/ names (ParseFileName)
//	syntax.go    BRE/ERE/-F/-P patterns translated into Go regexp syntax
//	matcher.go   Matcher: the selected lines of one file (Grep), GNU's read buffer model
//	run.go       Run and Output: one command over many files, scanned in any
//	             order, printed in order with what GNU keeps from file to file
//	boundary.go  \b \< \> next to non-ASCII letters (a bounded backtracker)
//	runeset.go   character sets; posix_classes.go: glibc's C.UTF-8 classes (generated)
//	printer.go   GNU's line output (context, -o, --color, -n, -b, -T, -Z, -z)
package grep

//go:generate go run ./gen -o posix_classes.go
