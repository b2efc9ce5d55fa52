#!/usr/bin/env bash
# A/B of perf_runner between two commits: builds each (default release profile, as a user
# would) in its own worktree and target directory, runs them alternated in rotated order
# (old new new old, then new old old new), and prints each row's median of each side,
# their ratio and their ranges. Run it on an otherwise idle machine.
#
#   bench/ab.sh OLD NEW [perf_runner options]     e.g. bench/ab.sh 240c408 HEAD --scenarios S1,S2
#
# Defaults to memq's rows only (--impls memq,memq-release,memq-threads --rounds 3).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
old=$(git rev-parse --short "$1")
new=$(git rev-parse --short "$2")
shift 2
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--impls memq,memq-release,memq-threads --rounds 3)
work=$(mktemp -d "${TMPDIR:-/tmp}/memq-ab.XXXXXX")
trap 'git worktree remove --force "$work/old" 2>/dev/null || true;
      git worktree remove --force "$work/new" 2>/dev/null || true' EXIT
for side in old new; do
    rev=${!side}
    git worktree add -q --detach "$work/$side" "$rev"
    echo "building perf_runner at $rev ($side)" >&2
    (cd "$work/$side" && cargo build -q --release -p memq-bench --bin perf_runner \
        --target-dir "$work/target-$side")
    cp "$work/target-$side/release/perf_runner" "$work/perf_runner.$side"
done
log="$work/ab.log"
for order in "old new new old" "new old old new"; do
    for side in $order; do
        echo "== $side" >>"$log"
        "$work/perf_runner.$side" "${args[@]}" --csv 2>/dev/null | grep '^S' >>"$log"
    done
done
echo "before: $old, after: $new; the raw runs: $log" >&2
python3 - "$log" <<'EOF'
import collections, statistics, sys
runs, side = collections.defaultdict(list), None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        side = line.split()[1]
        continue
    scenario, impl, rate, lost = line.strip().split(",")
    if lost != "0":
        print(f"LOST: {line.strip()}")
    runs[(scenario, impl, side)].append(int(rate))
print("| row | before (M msg/s) | after | after/before | before min–max | after min–max |")
print("|---|---|---|---|---|---|")
for scenario, impl in sorted({(s, i) for s, i, _ in runs}):
    o, n = runs[(scenario, impl, "old")], runs[(scenario, impl, "new")]
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"| {scenario} {impl} | {mo/1e6:.2f} | {mn/1e6:.2f} | {mn/mo:.3f} | "
          f"{min(o)/1e6:.2f}–{max(o)/1e6:.2f} | {min(n)/1e6:.2f}–{max(n)/1e6:.2f} |")
EOF
