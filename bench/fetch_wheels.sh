#!/usr/bin/env bash
# Prepare .whl/ for bench/gpu_check.sh on a GPU machine that cannot reach PyPI (e.g. the lent H200,
# whose image has CuPy, NumPy, scikit-learn and pytest but not Hydra or MLflow). Run it here, with
# network; then carry .whl/ to the GPU machine. About 22 MB for Python 3.12 on x86-64.
#   bench/fetch_wheels.sh [PYTHON_VERSION]      (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-3.12}
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
# antlr4-python3-runtime 4.9.3 (pinned by hydra-core) is published as a source archive only: build it.
python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
# mlflow-skinny + SQLAlchemy + alembic is all the SQLite tracking store needs (no server extras); optuna for the
# search row (issue 30).
python3 -m pip download -q --only-binary=:all: --find-links .whl -d .whl \
  --python-version "$py" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 \
  'hydra-core==1.3.*' 'mlflow-skinny>=3.13' sqlalchemy alembic 'optuna>=4'
du -sh .whl
