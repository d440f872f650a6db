package nodes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// tenantPod is a pod spec a tenant writes in its vCluster: the busybox image built here, running command, with the
// security contexts its namespace's restricted Pod Security asks for.
func tenantPod(command string) corev1.PodSpec {
	pod, container := nonRoot()
	return corev1.PodSpec{
		SecurityContext: pod,
		Containers: []corev1.Container{{Name: "main", Image: busybox, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/bin/sh", "-c", command}, SecurityContext: container}},
	}
}

func labelled(name string, spec corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: spec}
}

// checkWorkloadsThroughVCluster applies, through the tenant's own vCluster and with its own credentials, the ordinary
// workloads a tenant runs, and waits until each one has run: vCluster's syncer writes them to the host, the host's
// guards admit them as they are, and the real nodes run them. The host then shows no refused create.
func (c *cluster) checkWorkloadsThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config) {
	vc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := "default"
	create := func(what string, err error) {
		t.Helper()
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating %s through %s's vCluster", what, tenant)
		}
	}

	_, err = vc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"greeting": "hello-from-configmap"}}, metav1.CreateOptions{})
	create("a ConfigMap", err)
	_, err = vc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"},
		StringData: map[string]string{"token": "hello-from-secret"}}, metav1.CreateOptions{})
	create("a Secret", err)

	web := tenantPod("mkdir -p /tmp/www && echo served-by-web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www")
	_, err = vc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: labelled("web", web)}}, metav1.CreateOptions{})
	create("a Deployment", err)
	_, err = vc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	create("a Service", err)

	once := tenantPod("echo job done")
	once.RestartPolicy = corev1.RestartPolicyNever
	_, err = vc.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{Template: labelled("once", once)}}, metav1.CreateOptions{})
	create("a Job", err)
	indexed := tenantPod("echo index $JOB_COMPLETION_INDEX")
	indexed.RestartPolicy = corev1.RestartPolicyNever
	_, err = vc.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "indexed"},
		Spec: batchv1.JobSpec{Completions: ptr.To(int32(2)), Parallelism: ptr.To(int32(2)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Template: labelled("indexed", indexed)}}, metav1.CreateOptions{})
	create("an indexed Job", err)
	tick := tenantPod("echo tick")
	tick.RestartPolicy = corev1.RestartPolicyNever
	_, err = vc.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: labelled("tick", tick)}}}}, metav1.CreateOptions{})
	create("a CronJob", err)

	db := tenantPod("echo kept > /data/kept && cat /data/kept && exec sleep 3600")
	db.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	_, err = vc.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: labelled("db", db),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}},
		metav1.CreateOptions{})
	create("a StatefulSet with a volume claim", err)

	// A pod reading the ConfigMap and the Secret, with a native sidecar and a shared-memory emptyDir, and the client
	// that reaches the Deployment through its Service by name (the vCluster's own DNS).
	// It reads a service-account token for an audience of its own, too, which vCluster mints in the virtual cluster:
	// the host's copy projects none, so the host's guard that refuses such projections is no obstacle.
	mixed := tenantPod("cat /config/greeting /secret/token && echo && df -k /dev/shm | grep -c shm && " +
		"wget -qO- http://web && test -s /audience/token && echo audience-token && exec sleep 3600")
	mixed.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/config"},
		{Name: "secret", MountPath: "/secret"}, {Name: "shm", MountPath: "/dev/shm"}, {Name: "audience", MountPath: "/audience"}}
	mixed.Volumes = []corev1.Volume{
		{Name: "audience", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "https://sts.example.com", ExpirationSeconds: ptr.To(int64(600)), Path: "token"}},
		}}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "token"}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
	}
	sidecar := mixed.Containers[0]
	sidecar.Name, sidecar.Command, sidecar.VolumeMounts = "sidecar", []string{"/bin/sh", "-c", "exec sleep 3600"}, nil
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	mixed.InitContainers = []corev1.Container{sidecar}
	// The Service answers once the Deployment's pod is ready; the client retries until then.
	mixed.Containers[0].Command[2] = "until wget -qO- http://web >/dev/null 2>&1; do sleep 1; done; " + mixed.Containers[0].Command[2]
	_, err = vc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mixed"}, Spec: mixed}, metav1.CreateOptions{})
	create("a pod with a sidecar, shared memory, a ConfigMap and a Secret", err)

	done := map[string]func(context.Context) (bool, error){
		"the Deployment is available": func(ctx context.Context) (bool, error) {
			d, err := vc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			return err == nil && d.Status.AvailableReplicas == 1, nil
		},
		"the Job completed":                      jobDone(vc, ns, "once", 1),
		"the indexed Job completed both indexes": jobDone(vc, ns, "indexed", 2),
		"the CronJob ran a Job": func(ctx context.Context) (bool, error) {
			jobs, err := vc.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, j := range jobs.Items {
				if strings.HasPrefix(j.Name, "tick-") && j.Status.Succeeded == 1 {
					return true, nil
				}
			}
			return false, nil
		},
		"the StatefulSet's pod wrote its volume": logsSay(vc, ns, "db-0", "main", "kept\n"),
		"the pod read its ConfigMap and Secret, has shared memory, reached the Service by name and read its token": logsSay(vc, ns, "mixed", "main",
			"hello-from-configmaphello-from-secret\n1\nserved-by-web\naudience-token\n"),
	}
	for what, check := range done {
		// A CronJob runs at the next minute: the longest wait.
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, check)
		assert.NoError(t, err, "%s, through %s's vCluster: %s", what, tenant, describePods(ctx, vc, ns))
	}
	host, err := c.client.CoreV1().Pods(naming.Namespace(tenant)).Get(ctx, syncedName("mixed", ns, tenant), metav1.GetOptions{})
	require.NoError(t, err)
	for _, v := range host.Spec.Volumes {
		for _, source := range ptr.Deref(v.Projected, corev1.ProjectedVolumeSource{}).Sources {
			assert.Nil(t, source.ServiceAccountToken, "the host's copy of a pod projects no token of the host's (volume %s)", v.Name)
		}
	}
	events, err := c.client.CoreV1().Events(naming.Namespace(tenant)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" && !strings.Contains(e.Message, "error looking up service account") {
			t.Errorf("the host refused a create for %s: %s: %s", tenant, e.InvolvedObject.Name, e.Message)
		}
	}
}

func jobDone(vc kubernetes.Interface, ns, name string, completions int32) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		j, err := vc.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == completions, nil
	}
}

func logsSay(vc kubernetes.Interface, ns, pod, container, want string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		out, err := vc.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		return err == nil && string(out) == want, nil
	}
}

// describePods is each pod of the vCluster's namespace with its phase and waiting reasons, for a failure message.
func describePods(ctx context.Context, vc kubernetes.Interface, ns string) string {
	pods, err := vc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		s := p.Name + " " + string(p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				s += fmt.Sprintf(" %s:%s %s", cs.Name, w.Reason, w.Message)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
