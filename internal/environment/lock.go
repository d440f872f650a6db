package environment

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The environment's lock is a Lease on its cluster (naming.EnvironmentLock): every stack of an environment manages
// that one cluster, whatever backend holds their state, and the API server creates an object once, so two runs
// cannot both hold it. The holder renews it while it runs; a holder that was killed leaves it to expire.
const (
	lockDuration = 2 * time.Minute
	lockRenew    = 30 * time.Second
)

// lock takes the environment's lock for op until the returned function runs. An environment whose platform stack
// exports no kubeconfig yet has no cluster, and nothing to guard: no lock. The up of one stack of a CI fan-out (Only)
// takes none: the workflow runs one deploy of the environment at a time and orders its jobs, and the stack's own
// program refuses to run while a destroy, a recovery or a move holds the lock (naming.ExclusiveLockOps). A destroy,
// a recovery or a move takes it always, --only included.
func (e *Environment) lock(ctx context.Context, op string) (func(), error) {
	if op == "up" && (e.onlyGroup || (len(e.Stacks) == 1 && e.groups > 0)) {
		return func() {}, nil
	}
	client := e.Stacks[0].clusterClient(ctx)
	if client == nil {
		return func() {}, nil
	}
	return takeLock(ctx, client, e.Name(), op, e.Stacks[0].say)
}

// holder says who runs op: the user, the host and the process.
func holder(op string) string {
	host, _ := os.Hostname()
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return fmt.Sprintf("%s by %s@%s (pid %d)", op, name, host, os.Getpid())
}

// holderGone reports whether a lock's holder (as holder writes it) was a process of this host that no longer runs, as
// after a kill: its lock need not wait for the Lease to expire. A holder on another host is never taken as gone.
func holderGone(identity string) bool {
	host, _ := os.Hostname()
	var who string
	var pid int
	at := strings.LastIndex(identity, " by ")
	if at <= 0 {
		return false
	}
	if _, err := fmt.Sscanf(identity[at+len(" by "):], "%s (pid %d)", &who, &pid); err != nil {
		return false
	}
	_, holderHost, ok := strings.Cut(who, "@")
	return ok && holderHost == host && pid != os.Getpid() && !processRuns(pid)
}

// takeLock creates the environment's Lease, or takes over one that expired, and renews it until released.
func takeLock(ctx context.Context, client kubernetes.Interface, env, op string, say func(string, ...any)) (func(), error) {
	leases := client.CoordinationV1().Leases(naming.EnvironmentLockNamespace)
	name := naming.EnvironmentLock(env)
	now := metav1.NewMicroTime(time.Now())
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{naming.ManagedByLabel: naming.ManagedBy}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder(op)), LeaseDurationSeconds: ptr.To(int32(lockDuration.Seconds())),
			AcquireTime: &now, RenewTime: &now},
	}
	lease, err := leases.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *coordinationv1.Lease
		if old, err = leases.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("reading the lock of environment %s: %w", env, err)
		}
		if !expired(old, time.Now()) && !holderGone(ptr.Deref(old.Spec.HolderIdentity, "")) {
			return nil, fmt.Errorf("environment %s is locked by %s since %s (Lease %s/%s, renewed %s ago): wait for it to end; "+
				"a holder that was killed releases it %s after its last renewal", env, ptr.Deref(old.Spec.HolderIdentity, "?"),
				old.Spec.AcquireTime.Format(time.RFC3339), naming.EnvironmentLockNamespace, name,
				time.Since(old.Spec.RenewTime.Time).Round(time.Second), lockDuration)
		}
		say("environment %s: taking over the lock %s left by %s, which expired or whose process on this host is gone", env, name,
			ptr.Deref(old.Spec.HolderIdentity, "?"))
		want.ResourceVersion = old.ResourceVersion
		lease, err = leases.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("taking the lock of environment %s (Lease %s/%s): %w", env, naming.EnvironmentLockNamespace, name, err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(lockRenew)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
				if renewed, err := leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err == nil {
					lease = renewed
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		_ = leases.Delete(context.Background(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &lease.ResourceVersion}})
	}, nil
}

// expired reports whether a Lease's holder has not renewed it within its duration.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second))
}
