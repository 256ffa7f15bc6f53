#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: the gpu-marked tests, then the CPU-vs-GPU table.
# Installs nothing from the network. Where Hydra or MLflow is missing, it installs the wheels that
# bench/fetch_wheels.sh put in .whl/ (carried along) into /tmp/site. Logs go to $OUT when it is set.
# Budget: under 12 minutes before step 5 (tests ~1-2 min, benchmark ~2 min, batched K=1..4096 ~2 min on a 16-core host, the
# search <= 5 min, the cores' curve <= 5 min: steps 4 and 5 come last, so a tight budget loses only them).
#   bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
# the checkout, and plugins/ for Hydra's plugin scan (an install maps plugins/hydra_plugins/ into the namespace)
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}

if ! $PY -c "import hydra, mlflow, sklearn" 2>/dev/null; then
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "Hydra/MLflow missing and no .whl/: run bench/fetch_wheels.sh where there is network, carry .whl/" >&2
    exit 2
  fi
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT/env.txt"
# The gpu tests skip where CuPy cannot reach a device; here that is a failure of the check itself.
$PY -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__,
        'devices', cupy.cuda.runtime.getDeviceCount())" 2>&1 | tee -a "$OUT/env.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "CuPy cannot reach a CUDA device: nothing to check" >&2; exit 2; }

# 1. the gpu tests
timeout 200 $PY -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_gpu.py > "$OUT/gpu_tests.log" 2>&1
tests=$?

# 2. the benchmark; its table is printed last
timeout 300 $PY bench/gpu_bench.py --batched 1,16,256,1024,4096 --out "$OUT/gpu_bench.txt" > "$OUT/gpu_bench.log" 2>&1
bench=$?

# 3. text (issue 15), when the SMS file travelled with the checkout (shared/data/ or ../shared/data/): sparse
#    and dense on the GPU and on the CPU, and a batched group of 16 on the GPU: where the GPU overtakes the CPU
SMS=$(ls shared/data/SMSSpamCollection.tsv ../shared/data/SMSSpamCollection.tsv 2>/dev/null | head -n 1)
if [ -n "$SMS" ]; then
  for dev in gpu cpu; do
    timeout 150 $PY bench/text_bench.py --path "$SMS" --caps 1000,10000,50000 --device $dev > "$OUT/text_$dev.txt" 2>&1
  done
  timeout 150 $PY bench/text_bench.py --path "$SMS" --caps 10000,50000 --device gpu --group 16 > "$OUT/text_gpu_group.txt" 2>&1
else
  echo "no SMS file here: the text rows are left out" > "$OUT/text_gpu.txt"
fi

# 3b. a user's model (issue 35): examples/my_nets stacked K=32 against one at a time, and the MLP's kernel, on the GPU
timeout 120 $PY bench/interface_bench.py --only-models --device gpu --repeats 3 > "$OUT/interface_gpu.txt" 2>&1

# 4. the search (issue 30): 64 TPE trials on the GPU, rounds of 16 trained as groups against one trial a round;
#    target >= 3x (on 2 CPU cores a group costs about the sum of its members: 1.27x there)
if $PY -c "import optuna" 2>/dev/null; then
  timeout 300 $PY bench/sweep_bench.py --search --device gpu --out "$OUT/search_gpu.txt" > "$OUT/search_gpu.log" 2>&1
else
  echo "optuna missing (bench/fetch_wheels.sh brings it): the search row is left out" > "$OUT/search_gpu.txt"
fi

# 5. every core (issue 44): the CPU groups of bench/cores_bench.py's three sweeps on 1, 2, 4, 8 and 16 worker
#    processes (hydra.launcher.cpu_workers), once each: the scaling curve on this host's cores (CPU only; last, so
#    a tight budget loses only it)
timeout 300 $PY bench/sweep_bench.py --cores --workers 1,2,4,8,16 --repeats 1 --out "$OUT/cores.txt" > "$OUT/cores.log" 2>&1 \
  || echo "cores: exit $? (see cores.log)" >> "$OUT/cores.txt"

echo
echo "gpu tests: exit $tests ($(tail -n 1 "$OUT/gpu_tests.log"))"
for f in "$OUT"/text_*.txt "$OUT/interface_gpu.txt" "$OUT/search_gpu.txt" "$OUT/cores.txt"; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -n 12 "$f"; }; done
cat "$OUT/gpu_bench.txt" 2>/dev/null || echo "benchmark: exit $bench (see $OUT/gpu_bench.log)"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
