package mvcc

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckpointNameMax is the longest checkpoint name, in bytes.
const CheckpointNameMax = 128

// ValidCheckpointName checks a checkpoint name. A name shows up as a
// directory in .asof/ and is accepted wherever an HLC is (padfs diff, fork
// --asof, log --since), so it must be a valid file name that cannot be
// mistaken for anything else there:
//
//   - 1..CheckpointNameMax bytes of UTF-8, no '/', no NUL or other control
//     characters, no leading or trailing white space, not "." or "..";
//   - not an HLC or RFC 3339 time (it would shadow that instant in .asof/);
//   - not all digits (log --since reads digits as a sequence number);
//   - not "latest" or "now" (reserved for the newest state).
func ValidCheckpointName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: checkpoint name %q %s", ErrInvalid, name, why)
	}
	switch {
	case name == "":
		return fmt.Errorf("%w: empty checkpoint name", ErrInvalid)
	case len(name) > CheckpointNameMax:
		return fmt.Errorf("%w: checkpoint name is %d bytes (max %d)", ErrNameTooLong, len(name), CheckpointNameMax)
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case name == "." || name == "..":
		return bad("is reserved")
	case strings.ContainsRune(name, '/'):
		return bad("contains '/'")
	case strings.TrimSpace(name) != name:
		return bad("starts or ends with white space")
	case name == "latest" || name == "now":
		return bad("is reserved for the newest state")
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return bad("contains a control character")
		}
	}
	if strings.Trim(name, "0123456789") == "" {
		return bad("is all digits (it would read as a log sequence number)")
	}
	if _, err := ParseHLC(name); err == nil {
		return bad("reads as a time; pick a name that is not an HLC or RFC 3339 time")
	}
	return nil
}

// CreateCheckpoint names the session's current state: one commit (event
// session.checkpoint, the name in Detail) whose HLC the name stands for from
// then on. Names are unique per session; a duplicate is ErrExist.
func (s *Store) CreateCheckpoint(sid SessionID, name string) (HLC, error) {
	if err := ValidCheckpointName(name); err != nil {
		return 0, err
	}
	return s.Update(sid, func(t *WriteTx) error {
		if at, ok, err := t.Checkpoint(sid, name); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: checkpoint %q already names %s in session %s", ErrExist, name, at, sid)
		}
		if err := t.PutCheckpoint(name, t.HLC()); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpCheckpoint, Path: ".", Detail: name})
		return nil
	})
}

// CheckpointInfo is one named checkpoint.
type CheckpointInfo struct {
	Name string `json:"name"`
	HLC  HLC    `json:"-"`
}

// ListCheckpoints returns a session's checkpoints in HLC order.
func (s *Store) ListCheckpoints(sid SessionID) ([]CheckpointInfo, error) {
	var out []CheckpointInfo
	err := s.View(func(t *ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		return t.Checkpoints(sid, func(name string, at HLC) bool {
			out = append(out, CheckpointInfo{name, at})
			return true
		})
	})
	sortCheckpoints(out)
	return out, err
}

func sortCheckpoints(c []CheckpointInfo) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && (c[j].HLC < c[j-1].HLC || c[j].HLC == c[j-1].HLC && c[j].Name < c[j-1].Name); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}
