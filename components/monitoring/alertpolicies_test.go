package monitoring_test

// The tests of monitoring on GKE build its alert policies, which package cloudmonitoring registers; an external test
// file imports it for every test of the package, as a test of package monitoring itself cannot: cloudmonitoring
// imports monitoring.
import _ "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"
