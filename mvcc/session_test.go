package mvcc

import (
	"errors"
	"strings"
	"testing"
)

// A name picks one live session: a second live session of that name is
// refused (naming the first), by create, fork and rename; a forgotten
// session's name is free again; a rename is logged.
func TestSessionNamesUnique(t *testing.T) {
	e := lcOpen(t)
	a := e.session("work")
	if _, err := e.st.CreateSession("work", 0, 0); !errors.Is(err, ErrExist) || !strings.Contains(err.Error(), a.String()) {
		t.Errorf("second session named work: %v, want ErrExist naming %s", err, a)
	}
	if _, err := e.st.Fork(t.Context(), a, Latest, ForkOptions{Name: "work"}); !errors.Is(err, ErrExist) {
		t.Errorf("fork named work: %v, want ErrExist", err)
	}
	b := e.session("other")
	if err := e.st.RenameSession(b, "work"); !errors.Is(err, ErrExist) {
		t.Errorf("rename to a taken name: %v, want ErrExist", err)
	}
	if err := e.st.RenameSession(a, "work"); err != nil {
		t.Errorf("rename to its own name: %v", err)
	}
	if err := e.st.RenameSession(a, "work-v2"); err != nil {
		t.Fatal(err)
	}
	if h, err := e.st.ResolveSession("work-v2"); err != nil || h.ID != a {
		t.Errorf("resolve the new name: %v %v", h, err)
	}
	if _, err := e.st.ResolveSession("work"); !errors.Is(err, ErrNoSession) {
		t.Errorf("the old name still resolves: %v", err)
	}
	evs := e.events(a, LogFilter{})
	if last := evs[len(evs)-1]; last.Op != OpSessionRename || last.Detail != "work -> work-v2" {
		t.Errorf("rename event: %+v", last)
	}
	if _, err := e.st.Forget(b); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateSession("other", 0, 0); err != nil {
		t.Errorf("the name of a forgotten session: %v", err)
	}
	if err := e.st.RenameSession(b, "x"); !errors.Is(err, ErrForgotten) {
		t.Errorf("rename of a forgotten session: %v", err)
	}
}
