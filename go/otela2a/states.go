package otela2a

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// canonicalStates maps a state's letters (case and separators dropped) to the convention's
// value, so that a peer's "working", "Working", "input-required" (v0.3) or "cancelled" is
// recorded as TASK_STATE_WORKING, ... : the convention says the well-known value MUST be
// used when one applies. a2a-go keeps a JSON state as the string it read.
var canonicalStates = func() map[string]string {
	out := map[string]string{}
	for _, s := range []a2a.TaskState{
		a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired,
		a2a.TaskStateAuthRequired, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCanceled, a2a.TaskStateRejected,
	} {
		out[letters(string(s))] = string(s)
		out[letters(strings.TrimPrefix(string(s), "TASK_STATE_"))] = string(s)
	}
	out["cancelled"] = string(a2a.TaskStateCanceled)
	out["taskstatecancelled"] = string(a2a.TaskStateCanceled)
	out["unknown"] = "TASK_STATE_UNSPECIFIED" // v0.3's name for it
	out["unspecified"] = "TASK_STATE_UNSPECIFIED"
	out["taskstateunspecified"] = "TASK_STATE_UNSPECIFIED"
	return out
}()

func letters(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stateValue is the convention's value of a state as a peer spelled it, and the spelling when
// it differs. A missing state (a2a-go reads TASK_STATE_UNSPECIFIED and an absent one alike as
// "") says nothing and is not recorded; an unknown one passes as it came, if it is not too long.
func stateValue(s a2a.TaskState) (value, raw string, ok bool) {
	if s == a2a.TaskStateUnspecified || len(s) > maxValueLen {
		return "", "", false
	}
	c, known := canonicalStates[letters(string(s))]
	if !known || c == string(s) {
		return string(s), "", true
	}
	return c, string(s), true
}

// final: a state after which an A2A server closes a stream (terminal or interrupted).
func final(value string) bool {
	switch a2a.TaskState(value) {
	case a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected,
		a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		return true
	}
	return false
}
