#!/usr/bin/env bash
# The shared tile of the INT GEMVs v3 and v4 (int_gemv_tile.cuh) on the GPU machine, in one call
# (device tool, .deps carried), from the repository root: the INT weight tests (CudaIntWeights.*,
# V4EqualsV3BitForBit among them), then int_linear_bench at T 1, 4, 8 with v4's largest relative
# difference from v3 per layer (must be 0) and both kernels' us per call (the code generation is
# unchanged but for v4's U4 one-n-tile loops: 17 fewer integer instructions a ring round).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests int_linear_bench" bash scripts/gpu_build_test.sh -R CudaIntWeights || echo "GPU tests FAILED (rc $?)"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.txt" | tail -12
timeout 240 build-gpu/tests/int_linear_bench 1 4 8 > "$OUT/int_linear_bench.jsonl" 2> "$OUT/int_linear_bench.err"
echo "== int_linear_bench (rc $?): layer, T, v3 us, v4 us, v4-v3 max relative difference"
python3 - "$OUT/int_linear_bench.jsonl" <<'PY'
import json, sys
worst = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "v4_v3_max_rel_diff" not in r:
        continue
    d = r["v4_v3_max_rel_diff"]
    worst = d if worst is None else max(worst, d)
    print(f"{r['layer']:7s} T {r['T']:2d}  v3 {r['v3_us']:6.2f}  v4 {r['v4_us']:6.2f}  diff {d:.1e}")
print("v4 vs v3 max difference:", "no rows" if worst is None else f"{worst:g}", "(must be 0)")
PY
