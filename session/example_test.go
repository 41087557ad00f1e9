package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
)

// tempDir stands in for a real data directory in the examples.
func tempDir() string {
	d, err := os.MkdirTemp("", "padfs-example-")
	if err != nil {
		log.Fatal(err)
	}
	return d
}

// The basic lifecycle: create, write, read, edit, grep, ls, forget.
func Example() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, err := session.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	pad, err := st.Create("session-42")
	if err != nil {
		log.Fatal(err)
	}
	pad.Write(ctx, "notes.md", "# Notes\nFirst draft.\n")
	pad.Write(ctx, "todo/today.md", "- [ ] finish draft\n") // creates todo/

	notes, ok, _ := pad.Read("notes.md")
	fmt.Printf("%q %v\n", notes, ok)
	_, ok, _ = pad.Read("missing.md")
	fmt.Println("missing exists:", ok)

	if err := pad.Edit(ctx, "notes.md", "First draft.", "Second draft."); err != nil {
		log.Fatal(err)
	}
	hits, _ := pad.Grep(ctx, "draft", 10)
	for _, h := range hits {
		fmt.Printf("%s:%d:%s\n", h.Path, h.Line, h.Text)
	}
	paths, _ := pad.Ls("")
	fmt.Println(paths)

	pad.Forget()
	_, err = st.Resume(pad.ID())
	fmt.Println("resume after forget:", errors.Is(err, mvcc.ErrForgotten))
	// Output:
	// "# Notes\nFirst draft.\n" true
	// missing exists: false
	// notes.md:2:Second draft.
	// todo/today.md:1:- [ ] finish draft
	// [notes.md todo/today.md]
	// resume after forget: true
}

// Time travel: read a file as it was before an edit.
func ExampleSession_AsOf() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, _ := session.Open(dir)
	defer st.Close()
	pad, _ := st.Create("")

	pad.Write(ctx, "plan.md", "Plan v1: go left")
	decision, _ := st.Now() // a point in time between the two writes
	pad.Edit(ctx, "plan.md", "v1: go left", "v2: go right")

	latest, _, _ := pad.Read("plan.md")
	before, _, _ := pad.AsOf(decision).Read("plan.md")
	fmt.Println(latest)
	fmt.Println(before)
	// Output:
	// Plan v2: go right
	// Plan v1: go left
}

// Edit replaces exactly one occurrence.
func ExampleSession_Edit() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, _ := session.Open(dir)
	defer st.Close()
	pad, _ := st.Create("")
	pad.Write(ctx, "a.go", "x := 1\ny := 1\n")

	err := pad.Edit(ctx, "a.go", "1", "2")
	fmt.Println(errors.Is(err, session.ErrAmbiguous))
	err = pad.Edit(ctx, "a.go", "z := 1", "z := 2")
	fmt.Println(errors.Is(err, session.ErrNoMatch))
	pad.Edit(ctx, "a.go", "y := 1", "y := 2")
	s, _, _ := pad.Read("a.go")
	fmt.Print(s)
	// Output:
	// true
	// true
	// x := 1
	// y := 2
}

// A fork starts from the session's state and then evolves on its own.
func ExampleSession_Fork() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, _ := session.Open(dir)
	defer st.Close()
	pad, _ := st.Create("main")
	pad.Write(ctx, "idea.txt", "shared start\n")

	alt, _ := pad.Fork(ctx, "experiment")
	alt.Write(ctx, "idea.txt", "experiment\n")
	pad.Write(ctx, "idea.txt", "main line\n")

	a, _, _ := pad.Read("idea.txt")
	b, _, _ := alt.Read("idea.txt")
	fmt.Print(a, b)
	fmt.Println(alt.Header().Parent.String() == pad.ID())
	// Output:
	// main line
	// experiment
	// true
}

// Resuming is opening the store again and naming the session: no load step.
func ExampleStore_Resume() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, _ := session.Open(dir)
	pad, _ := st.Create("")
	pad.Write(ctx, "state.json", `{"step": 3}`)
	id := pad.ID()
	st.Close()

	st2, _ := session.Open(dir) // a later process
	defer st2.Close()
	again, _ := st2.Resume(id)
	s, _, _ := again.Read("state.json")
	fmt.Println(s)
	// Output:
	// {"step": 3}
}

// Hard forget is two steps: a receipt with a token, then the purge.
func ExampleStore_Purge() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	st, _ := session.Open(dir)
	defer st.Close()
	pad, _ := st.Create("")
	pad.Write(ctx, "secret.txt", "do not keep\n")

	r, _ := st.PlanPurge(pad.ID())
	fmt.Println(r.Files, "file,", r.Versions, "versions")
	if _, err := st.Purge(ctx, pad.ID(), "forget-wrong", nil); errors.Is(err, mvcc.ErrToken) {
		fmt.Println("wrong token refused")
	}
	if _, err := st.Purge(ctx, pad.ID(), r.Token, nil); err != nil {
		log.Fatal(err)
	}
	_, err := st.Lookup(pad.ID())
	fmt.Println(errors.Is(err, mvcc.ErrNoSession))
	// Output:
	// 1 file, 2 versions
	// wrong token refused
	// true
}
