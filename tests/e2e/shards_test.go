package e2e

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// shardEnv names the shard a run of this package takes, as "<i>/<n>"; unset, a run takes every test. `make test`
// runs the shards side by side, each on a control plane of its own, since one test mostly waits on its engine and
// its cluster: together they take far less time on 2 cores than one after the other (docs/contributing.md, "Set-up commands").
const shardEnv = "GT_E2E_SHARD"

// shards are the tests of each shard, balanced by their time on 2 cores on a cold build cache (docs/contributing.md, "Set-up
// commands"), where the upgrade test also compiles what the old program imports. Most tests that
// compile Go programs (a team's Go program, an old commit's program) share one shard, so that their links seldom run
// at once; the local stack's test builds the operators' CLI in the other.
var shards = [][]string{
	{"TestLocalStack", "TestRegroupKeepsEveryTenant", "TestBlockedDestroyExplainsItself",
		"TestSimulatedHardwareAppliesAndRemoves", "TestStateLeftIncompleteByAKilledEngineIsRepaired",
		"TestDemoRecoversAfterPurgeCrashAndInterruption", "TestYAMLProgramThroughTheProvider", "TestRepositoryProjectOnTheCLI"},
	{"TestTenantGroups", "TestUpgradeFromBeforeThePlatformComponentKeepsEveryObjectAndGuard", "TestRecoveryAfterKill",
		"TestServiceQuotasBeyondTheRangeAreRefusedBeforeAnythingIsCreated",
		"TestYAMLProgramWithBadPropertiesRegistersNothing", "TestMisspeltKeyFailsTheProgram", "TestGoProgramWithAPlatform"},
}

// selectShard checks that every test of the package in dir is in exactly one shard, then, for a spec "<i>/<n>",
// restricts the run to shard i's tests and returns i; for no spec, 0 and every test.
func selectShard(spec, dir string) (int, error) {
	tests, err := packageTests(dir)
	if err != nil {
		return 0, err
	}
	for _, name := range tests {
		in := 0
		for _, s := range shards {
			if slices.Contains(s, name) {
				in++
			}
		}
		if in != 1 {
			return 0, fmt.Errorf("e2e: %s is in %d of the shards (tests/e2e/shards_test.go): put it in one", name, in)
		}
	}
	for _, s := range shards {
		for _, name := range s {
			if !slices.Contains(tests, name) {
				return 0, fmt.Errorf("e2e: the shards name %s, which is no test of the package", name)
			}
		}
	}
	if spec == "" {
		return 0, nil
	}
	i, n, ok := strings.Cut(spec, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count != len(shards) || index < 0 || index >= count {
		return 0, fmt.Errorf("e2e: %s=%q: want <i>/%d, i from 0 to %d", shardEnv, spec, len(shards), len(shards)-1)
	}
	if run := flag.Lookup("test.run"); run != nil && run.Value.String() != "" {
		return 0, fmt.Errorf("e2e: %s and -run together: pick the tests with one of them", shardEnv)
	}
	if err := flag.Set("test.run", "^("+strings.Join(shards[index], "|")+")$"); err != nil {
		return 0, err
	}
	return index, nil
}

// packageTests are the names of the Test functions in the package's files in dir.
func packageTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var tests []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				tests = append(tests, fn.Name.Name)
			}
		}
	}
	return tests, nil
}
