#!/usr/bin/env bash
# Per-kernel GPU time of batch-1 decode (Qwen3-0.6B dummy, 1K context) with Nsight Compute:
# eager mode (the same kernels the CUDA graph replays), kernels of 8 decode steps after warm-up,
# summed by kernel name. Needs build-gpu/nanovllm (scripts/gpu_build_test.sh) and LD paths set.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  --launch-skip "${SKIP:-3000}" --launch-count "${COUNT:-2400}" \
  build-gpu/nanovllm bench --model qwen3-0.6b --load-format dummy --device cuda --latency \
  --latency-output-len 40 --enforce-eager > "$OUT/ncu_b1.csv" 2> "$OUT/ncu_b1.err"
python3 - "$OUT/ncu_b1.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]
name_i, t_i = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
tot, cnt = collections.Counter(), collections.Counter()
for r in rows[hdr + 2:]:
    if len(r) <= t_i: continue
    try: t = float(r[t_i])
    except ValueError: continue
    k = r[name_i][:90]
    tot[k] += t; cnt[k] += 1
all_t = sum(tot.values())
print(f"{sum(cnt.values())} kernels, {all_t/1e3:.1f} us total GPU time")
for k, t in tot.most_common(15):
    print(f"{t/all_t*100:5.1f}%  {t/1e3:9.1f} us  x{cnt[k]:5d}  {k}")
PY
