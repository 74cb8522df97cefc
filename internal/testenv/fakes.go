package testenv

import (
	"strings"

	"k8s.io/client-go/tools/events"
)

// EventReasons drains a fake recorder and returns "<type> <reason>" of each
// Event raised, in order: what the reconcile table tests compare.
func EventReasons(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			fields := strings.Fields(e)
			out = append(out, fields[0]+" "+fields[1])
		default:
			return out
		}
	}
}

// StatusWrites counts the writes, as a table test's fake API server records
// them ("<verb> <Kind>"), that were status writes.
func StatusWrites(writes []string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, "status ") {
			n++
		}
	}
	return n
}
