#!/usr/bin/env bash
# The GPU check, for a machine with one NVIDIA GPU: the gpu-marked tests, then the GPU benchmarks (one configuration:
# W1 and W4 on the CPU, the GPU and the naive per-epoch-sync loop; a batched group of K members of W1), and one table,
# printed last. Installs nothing from the network: where Hydra or MLflow is missing it installs the wheels that
# bench/fetch_wheels.sh put in .whl/ (carried along) into /tmp/site. Logs go to $OUT (a temporary folder when unset).
# Budget: under 10 minutes on one GPU (the steps' time limits: tests 200 s, benchmarks 300 s; wheels ~30 s).
#   bash bench/gpu_check.sh             # on the GPU machine
#   bash bench/gpu_check.sh --dry-run   # anywhere: this script's logic with the strict device stand-in in place of
#                                       # CuPy (SWEEPER_FAKE_GPU=strict): the same steps, the benchmarks --quick
#   bash bench/gpu_check.sh --more      # then text, a user's model, the search and the cores' curve (~15 min more)
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0 MORE=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --more) MORE=1 ;;
    *) echo "bench/gpu_check.sh: error: $arg is not allowed: expected --dry-run or --more" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
# the checkout, and plugins/ for Hydra's plugin scan (an install maps plugins/hydra_plugins/ into the namespace)
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
TESTS_S=200 BENCH_S=300 QUICK="" WORKLOADS=W1,W4 KS=1,16,256,1024,4096 REPEATS=3
if [ "$DRY" -eq 1 ]; then  # the logic, not the times: limits for a busy CI machine, the smallest workloads
  export SWEEPER_FAKE_GPU=strict  # device=gpu on the stand-in; the gpu-marked tests run there (tests/conftest.py)
  TESTS_S=1200 BENCH_S=600 QUICK=--quick WORKLOADS=W1 KS=1,4 REPEATS=1
fi

if ! $PY -c "import hydra, mlflow, sklearn" 2>/dev/null; then
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "Hydra/MLflow missing and no .whl/: run bench/fetch_wheels.sh where there is network, carry .whl/" >&2
    exit 2
  fi
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi

# 0. the device; the gpu tests skip where CuPy cannot reach one: here that is a failure of the check itself
if [ "$DRY" -eq 1 ]; then
  echo "dry run: the strict device stand-in (SWEEPER_FAKE_GPU=strict) in place of CuPy" | tee "$OUT/env.txt"
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT/env.txt"
  $PY -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__,
          'devices', cupy.cuda.runtime.getDeviceCount())" 2>&1 | tee -a "$OUT/env.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "CuPy cannot reach a CUDA device: nothing to check" >&2; exit 2; }
fi

# 1. the gpu tests
timeout "$TESTS_S" $PY -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gpu.py > "$OUT/gpu_tests.log" 2>&1
tests=$?

# 2. the benchmarks, one configuration and a batched group; their table is printed last
timeout "$BENCH_S" $PY bench/gpu_bench.py $QUICK --workloads "$WORKLOADS" --repeats "$REPEATS" --batched "$KS" \
  --out "$OUT/gpu_bench.txt" > "$OUT/gpu_bench.log" 2>&1
bench=$?

# 3. with --more: text (when the SMS file travelled along), a user's model, the search, every core
if [ "$MORE" -eq 1 ]; then
  SMS=$(ls shared/data/SMSSpamCollection.tsv ../shared/data/SMSSpamCollection.tsv 2>/dev/null | head -n 1)
  if [ -n "$SMS" ]; then
    for dev in gpu cpu; do
      timeout 150 $PY bench/text_bench.py --path "$SMS" --caps 1000,10000,50000 --device $dev > "$OUT/text_$dev.txt" 2>&1
    done
    timeout 150 $PY bench/text_bench.py --path "$SMS" --caps 10000,50000 --device gpu --group 16 > "$OUT/text_gpu_group.txt" 2>&1
  fi
  timeout 120 $PY bench/interface_bench.py --only-models --device gpu --repeats 3 > "$OUT/interface_gpu.txt" 2>&1
  if $PY -c "import optuna" 2>/dev/null; then
    timeout 300 $PY bench/sweep_bench.py --search --device gpu --out "$OUT/search_gpu.txt" > "$OUT/search_gpu.log" 2>&1
  fi
  timeout 300 $PY bench/sweep_bench.py --cores --workers 1,2,4,8,16 --repeats 1 --out "$OUT/cores.txt" > "$OUT/cores.log" 2>&1 \
    || echo "cores: exit $? (see cores.log)" >> "$OUT/cores.txt"
  for f in "$OUT"/text_*.txt "$OUT/interface_gpu.txt" "$OUT/search_gpu.txt" "$OUT/cores.txt"; do
    [ -f "$f" ] && { echo "== $(basename "$f")"; tail -n 12 "$f"; }
  done
fi

echo
echo "gpu tests: exit $tests ($(tail -n 1 "$OUT/gpu_tests.log"))"
echo "logs: $OUT"
cat "$OUT/gpu_bench.txt" 2>/dev/null || echo "benchmark: exit $bench (see $OUT/gpu_bench.log)"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
