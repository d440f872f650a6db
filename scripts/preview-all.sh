#!/usr/bin/env bash
# Runs `pulumi preview --refresh --diff` for every stack in stacks/ (or the stacks named), one after another, carrying on past
# failures, then prints one line per stack: ok, or failed with pulumi's exit code. Exits 1 if any preview failed.
# Needs the pulumi CLI, a login to the state backend (`pulumi login gs://...`), PULUMI_CONFIG_PASSPHRASE and the
# cloud credentials of the stacks previewed. Every preview runs the project's policy pack (the guard rails of
# ./policy, built by `make tools`): a mandatory violation fails that stack's preview.
#
#   scripts/preview-all.sh                          every stacks/Pulumi.<stack>.yaml
#   scripts/preview-all.sh gke-dev scw-dev          only these
#   scripts/preview-all.sh -- --parallel 4         extra arguments for every `pulumi preview`
#
# Environment:
#   GT_POLICY_PACK   the policy pack binary (default .tools/bin/gpu-tenancy-policy); set it empty to preview without it
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
# A CLI the user installed wins; the one `make tools` builds is the fallback.
PATH=$PATH:$ROOT/.tools/bin

stacks=()
while (($#)); do
	case $1 in
	--)
		shift
		break
		;;
	-h | --help)
		sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) stacks+=("$1") ;;
	esac
	shift
done
extra=("$@")

command -v pulumi >/dev/null || {
	echo "preview-all: the pulumi CLI is not on PATH (install it, or run \`make tools\`)" >&2
	exit 2
}

# The pack is a binary the engine launches directly (no policy language plugin needed).
policy=()
POLICY_PACK=${GT_POLICY_PACK-$ROOT/.tools/bin/gpu-tenancy-policy}
if [[ -z $POLICY_PACK ]]; then
	echo "preview-all: GT_POLICY_PACK is empty: previewing without the policy pack" >&2
elif [[ -x $POLICY_PACK ]]; then
	policy=(--policy-pack "$POLICY_PACK")
else
	echo "preview-all: no policy pack at $POLICY_PACK (run \`make tools\`): previewing without it" >&2
fi

if ((${#stacks[@]} == 0)); then
	for f in stacks/Pulumi.*.yaml; do
		[[ -e $f ]] || continue
		s=${f#stacks/Pulumi.}
		stacks+=("${s%.yaml}")
	done
fi
if ((${#stacks[@]} == 0)); then
	echo "preview-all: no stacks/Pulumi.<stack>.yaml found" >&2
	exit 2
fi

# A stack file with gpu-tenancy:tenantGroups is an environment of several stacks (docs/operating.md, "Several environments, drift and recovery"): its own, the
# platform, and <stack>.tenants-<i> for each group, which read the same file (--config-file), plus any group stack the
# backend still holds beyond them (gpu-tenancy stacks lists the same). A stack file `pulumi stack init` wrote for a
# group stack holds no config of its own and is skipped. The value may be quoted and followed by a comment.
groups_of() {
	sed -En 's/^[[:space:]]+gpu-tenancy:tenantGroups:[[:space:]]*"?([0-9]+)"?[[:space:]]*(#.*)?$/\1/p' "stacks/Pulumi.$1.yaml"
}
# leftover_of lists the group stacks of environment $1 beyond its $2 groups that the backend holds with resources
# (`pulumi stack ls --json`: one field a line, resourceCount after name).
leftover_of() {
	pulumi stack ls --json --project gpu-tenancy 2>/dev/null | awk -v env="$1" -v groups="$2" '
		/"name":/ { name = $0; sub(/.*"name": *"/, "", name); sub(/".*/, "", name); sub(/.*\//, "", name) }
		/"resourceCount":/ {
			count = $0; gsub(/[^0-9]/, "", count)
			if (index(name, env ".tenants-") == 1) {
				group = substr(name, length(env) + 10)
				if (group ~ /^(0|[1-9][0-9]*)$/ && group + 0 >= groups + 0 && count + 0 > 0) print name
			}
		}'
	return 0
}
declare -A config_of groups
for s in "${stacks[@]}"; do
	groups[$s]=$(groups_of "$s")
	for ((i = 0; i < ${groups[$s]:-0}; i++)); do config_of[$s.tenants-$i]=$s; done
done
previews=()
for s in "${stacks[@]}"; do
	[[ -n ${config_of[$s]:-} ]] && continue
	previews+=("$s")
	config_of[$s]=$s
	for ((i = 0; i < ${groups[$s]:-0}; i++)); do previews+=("$s.tenants-$i"); done
	if ((${groups[$s]:-0} > 0)); then
		for left in $(leftover_of "$s" "${groups[$s]}"); do
			previews+=("$left")
			config_of[$left]=$s
		done
	fi
done

declare -A code
failed=0
for s in "${previews[@]}"; do
	args=(--refresh --diff --stack "$s")
	[[ ${config_of[$s]} == "$s" ]] || args+=(--config-file "stacks/Pulumi.${config_of[$s]}.yaml")
	# --refresh: drift (an object deleted or edited by hand) shows only against what exists.
	echo "=== pulumi preview ${args[*]}${policy[*]:+ ${policy[*]}}${extra[*]:+ ${extra[*]}}"
	pulumi preview "${args[@]}" "${policy[@]}" "${extra[@]}"
	code[$s]=$?
	((code[$s] == 0)) || failed=$((failed + 1))
done

echo
echo "preview summary:"
for s in "${previews[@]}"; do
	if ((code[$s] == 0)); then
		printf '  %-24s ok\n' "$s"
	else
		printf '  %-24s failed (exit %d)\n' "$s" "${code[$s]}"
	fi
done
if ((failed > 0)); then
	echo "$failed of ${#previews[@]} previews failed"
	exit 1
fi
echo "all ${#previews[@]} previews ok"
