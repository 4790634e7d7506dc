#!/usr/bin/env bash
# Builds the project with the CUDA backend and runs the GPU tests (ctest -L gpu), on the GPU
# machine. Usage (from the repository root, through the device tool's `run`, carrying .deps):
#   bash scripts/gpu_build_test.sh [extra ctest args]
# The GPU image lacks the project's Debian dev packages; .deps/ (git-ignored) holds their .deb files,
# fetched on the dev machine with
#   mkdir -p .deps && cd .deps && apt-get download nlohmann-json3-dev libxxhash-dev libxxhash0 \
#     libgtest-dev libcli11-dev libopenblas-dev libopenblas-pthread-dev libopenblas0 \
#     libopenblas0-pthread libgfortran5 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 \
#     libpcre2-posix3 libutf8proc-dev libutf8proc2 pkgconf pkgconf-bin libpkgconf3 libquadmath0 \
#     libboost1.81-dev
# They are unpacked into /tmp/deps (never into /) and CMake/pkg-config are pointed there.
# Env: BUILD_DIR (build-gpu), CUDA_ARCH (90a), OUT (where logs go; the device tool sets it),
# GPU_TEST_JOBS (3: tests run side by side on the one GPU; their time is mostly CPU references).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
CUDA_ARCH=${CUDA_ARCH:-90a}
export PATH=/usr/local/cuda/bin:$PATH

need=0
for h in /usr/include/nlohmann/json.hpp /usr/include/xxhash.h /usr/include/gtest/gtest.h /usr/include/CLI/CLI.hpp \
         /usr/include/pcre2.h /usr/include/utf8proc.h /usr/include/boost/beast.hpp; do
  [ -e "$h" ] || need=1
done
command -v pkg-config >/dev/null && pkg-config --exists openblas libxxhash libpcre2-8 libutf8proc || need=1
if [ "$need" = 1 ]; then
  [ -d .deps ] || { echo "gpu_build_test: dev packages missing and no .deps/ carried"; exit 2; }
  P=/tmp/deps
  mkdir -p $P
  for f in .deps/*.deb; do dpkg -x "$f" $P; done
  find $P -name '*.pc' -exec sed -i -E "s#=/usr(/|\$)#=$P/usr\\1#g" {} +
  pcdirs=$(find $P -type d -name pkgconfig | tr '\n' ':')
  export PKG_CONFIG_PATH=${pcdirs}${PKG_CONFIG_PATH:-}
  command -v pkg-config >/dev/null || export PKG_CONFIG=$P/usr/bin/pkgconf
  export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$P/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
  export CMAKE_PREFIX_PATH=$P/usr:$P/usr/lib/x86_64-linux-gnu/openblas-pthread${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export CPATH=$P/usr/include${CPATH:+:$CPATH}
  echo "gpu_build_test: using carried dev packages from .deps"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# The Python package with the interpreter that has torch and a pip-installed pybind11 (the image's
# python3 on PATH, not /usr/bin/python3, which CMake would otherwise take).
py=(); python3 -m pybind11 --cmakedir >/dev/null 2>&1 && py=(-DPython_EXECUTABLE="$(command -v python3)")
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
  -DNANOVLLM_CUDA=ON -DNANOVLLM_BUILD_TESTS=ON "${py[@]}" >"$OUT/configure.txt" 2>&1 || { tail -40 "$OUT/configure.txt"; exit 3; }
cmake --build "$BUILD_DIR" -j"$(nproc)" --target ${TARGETS:-gpu_tests} >"$OUT/build.txt" 2>&1 || { grep -E "error|Error" -A3 "$OUT/build.txt" | head -80; exit 4; }
# The tests' time is mostly their CPU references (OpenMP): side by side, each takes its share of the
# cores. With every test on all of them, CudaPooling.EmbeddingsEqualTheCpu took 14 s alone, 42 s
# beside two others and 169 s beside three (2026-11-30): OpenMP teams spinning on shared cores.
jobs=${GPU_TEST_JOBS:-3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / jobs > 1 ? $(nproc) / jobs : 1 ))}
echo "gpu_build_test: build done at ${SECONDS} s; ctest -j$jobs, OMP_NUM_THREADS=$OMP_NUM_THREADS"
ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure --timeout 600 -j"$jobs" "$@" 2>&1 | tee "$OUT/ctest.txt" | \
  grep -vE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" | tail -150
rc=${PIPESTATUS[0]}
cp "$BUILD_DIR"/Testing/Temporary/LastTest.log "$OUT/" 2>/dev/null
grep -hE "^\[gpu\]" "$BUILD_DIR"/Testing/Temporary/LastTest.log 2>/dev/null | grep -vE "decode B1 |prefill .* len " | sort -u | head -80
exit "$rc"
