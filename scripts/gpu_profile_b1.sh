#!/usr/bin/env bash
# Per-kernel GPU time of batch-1 decode (MODEL, default Qwen3-0.6B; dummy weights; 1K context) with Nsight Compute:
# eager mode (the same kernels the CUDA graph replays), kernels of 8 decode steps after warm-up,
# summed by kernel name. Needs build-gpu/nanovllm (scripts/gpu_build_test.sh) and LD paths set.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw \
  --launch-skip "${SKIP:-3000}" --launch-count "${COUNT:-2400}" \
  build-gpu/nanovllm bench --model "${MODEL:-qwen3-0.6b}" --load-format dummy --device cuda --latency \
  --latency-output-len 40 --enforce-eager > "$OUT/ncu_b1.csv" 2> "$OUT/ncu_b1.err"
python3 - "$OUT/ncu_b1.csv" "${TOP:-15}" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]
name_i, t_i = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
g_i = h.index("launch__grid_size") if "launch__grid_size" in h else None
tot, cnt = collections.Counter(), collections.Counter()
for r in rows[hdr + 2:]:
    if len(r) <= t_i: continue
    try: t = float(r[t_i].replace(",", ""))
    except ValueError: continue
    k = r[name_i][:80] + (f" grid={r[g_i]}" if g_i is not None else "")
    tot[k] += t; cnt[k] += 1
all_t = sum(tot.values())
print(f"{sum(cnt.values())} kernels, {all_t/1e3:.1f} us total GPU time")
for k, t in tot.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 15):
    print(f"{t/all_t*100:5.1f}%  {t/1e3:9.1f} us  x{cnt[k]:5d}  {k}")
PY
