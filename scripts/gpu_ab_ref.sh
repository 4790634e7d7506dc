#!/usr/bin/env bash
# A/B of the working tree against a git ref in one device call: the same targets built from both
# sources on the same GPU machine, then a command run with each build in turn, alternating.
#
#   1. On the dev machine (it has the git history; the device's copy of the tree does not):
#        bash scripts/gpu_ab_ref.sh save REF
#      writes REF's version of every file under src/ bench/ apps/ tests/ that differs from the working
#      tree into ab-ref/ (files REF lacks are listed in ab-ref/ABSENT). ab-ref/ is untracked and not
#      ignored, so the device tool carries it; remove it before committing.
#   2. Through the device tool (carry .deps):
#        TARGETS="prefill_bench nanovllm_cli" ROUNDS=2 bash scripts/gpu_ab_ref.sh run 'CMD'
#      builds TARGETS from the working tree ("new"), swaps in ab-ref/'s files and builds again
#      ("ref"), then runs CMD ROUNDS times per build, new first, with $AB the directory holding that
#      build's executables (e.g. 'NANOVLLM_BENCH_TILED=0 $AB/prefill_bench 32x512'). The working
#      tree's files are put back and TARGETS rebuilt from them before CMD runs, so the build
#      directory is the working tree's again. Executables link the project statically, so a copy
#      of each build's binaries stays valid after the rebuilds.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  save)
    ref=${2:?usage: gpu_ab_ref.sh save REF}
    rm -rf ab-ref && mkdir -p ab-ref
    git diff --name-only "$ref" -- src bench apps tests | while read -r f; do
      if git cat-file -e "$ref:$f" 2>/dev/null; then
        mkdir -p "ab-ref/$(dirname "$f")"
        git show "$ref:$f" > "ab-ref/$f"
      else
        echo "$f" >> ab-ref/ABSENT
      fi
    done
    git rev-parse "$ref" > ab-ref/REF
    echo "ab-ref/: $(find ab-ref -type f ! -name REF ! -name ABSENT | wc -l) files of $(cat ab-ref/REF)" \
      "$( [ -f ab-ref/ABSENT ] && echo "(+ $(wc -l < ab-ref/ABSENT) absent there)")"
    ;;
  run)
    cmd=${2:?usage: gpu_ab_ref.sh run CMD}
    [ -f ab-ref/REF ] || { echo "gpu_ab_ref: no ab-ref/ (run 'save REF' on the dev machine)"; exit 2; }
    OUT=${OUT:-/tmp/gpu-out}
    mkdir -p "$OUT"
    TARGETS=${TARGETS:-nanovllm_cli}
    BUILD_DIR=${BUILD_DIR:-build-gpu}
    # The first build configures the tree (dev packages from .deps); its tests are skipped.
    TARGETS="$TARGETS" bash scripts/gpu_build_test.sh -R '^$' > "$OUT/ab_build_new.txt" 2>&1
    grep -q "build done" "$OUT/ab_build_new.txt" || { echo "gpu_ab_ref: new build failed"; tail -30 "$OUT/ab_build_new.txt"; exit 4; }
    [ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
    keep() {  # this build's executables into /tmp/ab-$1
      rm -rf "/tmp/ab-$1" && mkdir -p "/tmp/ab-$1"
      find "$BUILD_DIR" "$BUILD_DIR/tests" -maxdepth 1 -type f -perm -u+x ! -name '*.so' -exec cp {} "/tmp/ab-$1/" \;
    }
    keep new
    # Swap in the ref's files (the working tree's saved under /tmp/ab-src), build, swap back.
    rm -rf /tmp/ab-src && mkdir -p /tmp/ab-src
    files=$(cd ab-ref && find . -type f ! -name REF ! -name ABSENT | sed 's#^\./##')
    for f in $files; do mkdir -p "/tmp/ab-src/$(dirname "$f")"; cp "$f" "/tmp/ab-src/$f"; cp "ab-ref/$f" "$f"; done
    absent=$(cat ab-ref/ABSENT 2>/dev/null)
    for f in $absent; do mkdir -p "/tmp/ab-src/$(dirname "$f")"; mv "$f" "/tmp/ab-src/$f"; done
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target $TARGETS > "$OUT/ab_build_ref.txt" 2>&1
    ok=$?
    keep ref
    for f in $files $absent; do cp "/tmp/ab-src/$f" "$f"; done
    [ "$ok" = 0 ] || { echo "gpu_ab_ref: ref build failed"; grep -m10 -E "error" "$OUT/ab_build_ref.txt"; exit 4; }
    # Rebuild from the working tree's files now: the device tool's next call copies the tree back
    # with its own (older) times, so objects left from the ref's files would look up to date to the
    # next build (a later gpu_session.sh on this warm machine then linked objects of both trees).
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target $TARGETS > "$OUT/ab_build_back.txt" 2>&1 ||
      { echo "gpu_ab_ref: rebuilding the working tree failed"; exit 4; }
    echo "gpu_ab_ref: new = working tree, ref = $(cat ab-ref/REF); builds done at ${SECONDS} s"
    for round in $(seq "${ROUNDS:-2}"); do
      for side in new ref; do
        echo "== $side (round $round)"
        AB=/tmp/ab-$side bash -c "$cmd"
      done
    done
    ;;
  *)
    echo "usage: gpu_ab_ref.sh save REF | run CMD"
    exit 2
    ;;
esac
