package rules

import "fmt"

// Queries are the PromQL views of the operators' dashboard (package dashboard), built from the selectors and joins
// the rules use, so that a panel and the alert about the same thing never disagree.
type Queries struct {
	// DevicesRequested is, per tenant and class (labels job, tenant, class), the devices the tenant's claims request:
	// the showback's DevicesRequested, from the raw series.
	DevicesRequested string
	// DeviceQuota is, per tenant and class, the devices its quota allows: what the tenant may hold of the class.
	DeviceQuota string
	// Waiting is, per pod waiting for devices, the seconds since its creation (labels namespace, pod, uid, tenant and
	// the claim it waits for, or the extended-resource name it asks for), with no threshold: ClaimPendingTooLong is
	// this above its threshold.
	Waiting string
	// WaitingPerTenant counts the pods of Waiting per tenant, each once however many claims it waits for.
	WaitingPerTenant string
	// PluginMissing is the GPU nodes (labels node, pool) with no Running kubelet-plugin pod: KubeletPluginNotRunning
	// without its hold.
	PluginMissing string
	// PrepareErrors is the kubelet plugin's failed prepares per node and error type over the window.
	PrepareErrors string
	// Requests is the kubelet plugin's prepare and unprepare requests per second, per node and operation, over the
	// window.
	Requests string
	// PreparedDevices is the devices the kubelet plugin holds prepared, per node and device type.
	PreparedDevices string
	// ServicesHeld is the Services that hold an address of the cluster's Service range; ServiceRangeUse is it over
	// Params.ServiceAddresses, or "" when that is zero.
	ServicesHeld, ServiceRangeUse string
}

// QueriesFor returns the dashboard's queries for p; window is the range of the rates (Grafana's $__rate_interval on a
// dashboard, a Prometheus duration in a test).
func QueriesFor(p Params, window string) Queries {
	p = p.withDefaults()
	x := newExprs(p)
	waiting := x.waitedForClaims
	if x.waitedByName != "" {
		waiting = "(" + waiting + ") or (" + x.waitedByName + ")"
	}
	// The kubelet plugin's series (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 pkg/metrics/dra_requests.go) carry
	// driver and operation, or driver and error_type, or node, driver and device_type; node, where the plugin does not
	// set it, is the scrape's (the PodMonitor's and the ClusterPodMonitoring's relabelling).
	q := Queries{
		DevicesRequested: devicesOfQuota(p.Jobs, "used", deviceKeys),
		DeviceQuota:      devicesOfQuota(p.Jobs, "hard", deviceKeys),
		Waiting:          waiting,
		WaitingPerTenant: fmt.Sprintf(`count by (%s) (max by (namespace, pod, uid, %s) (%s))`, TenantLabel, TenantLabel, waiting),
		PluginMissing:    x.pluginMissing(),
		PrepareErrors:    fmt.Sprintf(`sum by (node, error_type) (increase(%s[%s]))`, x.plugin("nvidia_dra_node_prepare_errors_total"), window),
		Requests:         fmt.Sprintf(`sum by (node, operation) (rate(%s[%s]))`, x.plugin("nvidia_dra_requests_total"), window),
		PreparedDevices:  fmt.Sprintf(`sum by (node, device_type) (%s)`, x.plugin("nvidia_dra_prepared_devices")),
		ServicesHeld:     x.servicesHeld(),
	}
	if p.ServiceAddresses > 0 {
		q.ServiceRangeUse = fmt.Sprintf(`%s / %d`, q.ServicesHeld, p.ServiceAddresses)
	}
	return q
}
