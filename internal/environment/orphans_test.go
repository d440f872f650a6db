package environment

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The objects a state records, keyed as the cluster's objects are: the core group is empty, the version is left
// out, and an ID is namespace/name or name (the sweep's objects are cluster-scoped: name).
func TestRecordedKeysMatchTheClustersObjects(t *testing.T) {
	keys := recordedKeys([]stateResource{
		{Type: "kubernetes:core/v1:Namespace", Custom: true, ID: "vcluster-team-a"},
		{Type: "kubernetes:flowcontrol.apiserver.k8s.io/v1:FlowSchema", Custom: true, ID: "gpu-tenancy-team-a"},
		{Type: "kubernetes:apps/v1:StatefulSet", Custom: true, ID: "vcluster-team-a/team-a"},
		{Type: "gpu-tenancy:tenancy:Tenant", ID: ""},
		{Type: "kubernetes:helm.sh/v4:Chart", ID: ""},
		{Type: "pulumi:providers:kubernetes", Custom: true, ID: "0b5e"},
	})
	assert.Equal(t, map[string]bool{
		"/Namespace/vcluster-team-a":                                 true,
		"flowcontrol.apiserver.k8s.io/FlowSchema/gpu-tenancy-team-a": true,
		"apps/StatefulSet/vcluster-team-a/team-a":                    true,
	}, keys)
	for _, o := range []clusterObject{
		{Kind: "Namespace", Name: "vcluster-team-a"},
		{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema", Name: "gpu-tenancy-team-a"},
	} {
		assert.True(t, keys[o.key()], "%s is recorded", o)
	}
}

// Only what an interrupted run created, after the stack's last record, and that no state records, is removed;
// what predates that record is named and kept; what a controller made or what is already going is left alone.
func TestUnrecordedRemovesOnlyWhatAnInterruptedRunCreated(t *testing.T) {
	since := time.Date(2026, 12, 3, 12, 0, 0, 500_000_000, time.UTC)
	after, before, sameSecond := since.Add(time.Minute), since.Add(-time.Hour), since.Truncate(time.Second)
	recorded := map[string]bool{"/Namespace/vcluster-team-a": true, "/Namespace/vcluster-moved": true}
	cases := map[string]struct {
		object       clusterObject
		since        time.Time
		remove, keep bool
	}{
		"a namespace created after the last record and recorded nowhere is removed": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-dropped", Created: after}, since: since, remove: true},
		"a cluster-scoped object of the same run is removed": {
			object: clusterObject{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "vc-dropped", Created: after},
			since:  since, remove: true},
		"a stack never written before: whatever carries its label and no state records is removed": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-first", Created: before}, since: time.Time{}, remove: true},
		"a namespace the stack records stays": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-team-a", Created: after}, since: since},
		"a namespace another stack records (a move that did not finish) stays": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-moved", Created: after}, since: since},
		"an unrecorded object older than the last record is named and kept": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-old", Created: before}, since: since, keep: true},
		"an object of the last record's own second is named and kept": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-tie", Created: sameSecond}, since: since, keep: true},
		"an object a controller made goes with its owner": {
			object: clusterObject{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "aggregate", Created: after,
				Dependent: true}, since: since},
		"the namespace of a tenant the config lists is named and kept, whenever it was created": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-listed", Created: after}, since: since, keep: true},
		"a terminating namespace is already going": {
			object: clusterObject{Kind: "Namespace", Name: "vcluster-going", Created: after, Terminating: true}, since: since},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			remove, keep := unrecorded([]clusterObject{c.object}, func(k string) bool { return recorded[k] }, c.since,
				map[string]bool{"vcluster-listed": true})
			assert.Equal(t, c.remove, len(remove) == 1, "removed: %v", remove)
			assert.Equal(t, c.keep, len(keep) == 1, "kept and named: %v", keep)
		})
	}
}

// The time a group's sweep counts from: the backend's, or now (nothing removed) where the backend hides it.
func TestLastWrittenIsTheBackendsTimeOrNow(t *testing.T) {
	now := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	running, done, five := true, false, 5
	since := lastWritten([]backendStack{
		{Name: "prod.tenants-0", LastUpdate: "2026-12-03T17:23:33.412Z"},
		{Name: "prod.tenants-1", LastUpdate: "2026-12-03T17:23:33.412Z", UpdateInProgress: &done},
		{Name: "prod.tenants-2", ResourceCount: new(int)},
		{Name: "prod.tenants-3", UpdateInProgress: &running},
		{Name: "prod.tenants-4", LastUpdate: "yesterday"},
		{Name: "prod.tenants-5", ResourceCount: &five},
	}, now)
	written := time.Date(2026, 12, 3, 17, 23, 33, 412_000_000, time.UTC)
	assert.True(t, written.Equal(since["prod.tenants-0"]), "the state's time: %v", since["prod.tenants-0"])
	assert.True(t, written.Equal(since["prod.tenants-1"]), "a finished update on a backend that tracks them")
	_, ok := since["prod.tenants-2"]
	assert.False(t, ok, "a stack never written counts from the beginning")
	assert.Equal(t, now, since["prod.tenants-3"], "an update still running hides the time: nothing is removed")
	assert.Equal(t, now, since["prod.tenants-4"], "an unreadable time: nothing is removed")
	assert.Equal(t, now, since["prod.tenants-5"], "resources without a time (a state imported or moved in): nothing is removed")
}
