package bucket

import (
	"k8s.io/apimachinery/pkg/api/meta"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

// computeBucketStatus derives the status from what one reconcile observed
// and how it ended.
// Per-check figures (time, latency) are metrics, not status: a healthy bucket
// checked again produces an identical status and costs no write, and a
// reconcile that checked nothing (none was due) writes nothing.
func computeBucketStatus(b *storagev1.StorageBucket, obs *bucketObservation, out outcome.Outcome) storagev1.StorageBucketStatus {
	st := *b.Status.DeepCopy()
	found := obs.waits
	if obs.checked != nil {
		found = &obs.checked.summary
	}
	summary := stores.Summary(out, found)
	if summary == nil {
		return st
	}
	gen := b.Generation
	st.ObservedGeneration = gen
	st.LastHandledReconcileAt = operate.RequestedAt(b)
	operate.Resume(&st.Conditions)
	if res := obs.checked; res != nil {
		if name := stores.BucketName(b); st.BucketName != name {
			st.BucketName, st.Claim = name, ""
		}
		if res.claim != "" {
			st.Claim = res.claim
		}
		switch {
		case len(settingsOf(b).declared()) == 0:
			meta.RemoveStatusCondition(&st.Conditions, conditions.SettingsApplied)
		case res.settings != nil:
			s := res.settings.summary()
			conditions.Set(&st.Conditions, gen, conditions.SettingsApplied, s.Progress == conditions.Done, s.Reason, s.Message)
		}
		// Otherwise the check did not get as far as the settings: what is
		// known of them stays.
	}
	conditions.Summarize(&st.Conditions, gen, *summary)
	return st
}
