"""The MLflow UI as a person sees it: a real sweep, ``mlflow server`` over its store, headless Chromium on its pages.

Install, once (neither goes into the project's environment; the browser driver sits in a folder of its own
that this script appends to ``sys.path``, after the project's packages):

    apt-get install -y chromium                                       # Debian's Chromium: /usr/bin/chromium
    python -m pip install --target /tmp/ui-driver playwright          # the driver; no browser download needed

Run, from the checkout (the sweep and the server run with this interpreter and this checkout's sweeper):

    python bench/ui_check.py                      # screenshots into /tmp/ui_shots, server on 127.0.0.1:5077
    python bench/ui_check.py --port 5099 --shots /tmp/shots --keep    # --keep: leave the store and sweep folder

It runs ``python -m sweeper -m lr=0.001,0.005 epochs=200`` into a fresh SQLite store, serves it, and checks in
a fresh browser profile: the address the sweep ends with ("browse with:") opens the runs table on the
model-training views; the parent expands into its two runs, each with its Dataset and Models cells; a run
opened from the table lists its logged model and data sets, charts train_loss and val_loss, and lists its
artifacts; the parent's plots (PNG) display. It also says where MLflow's own links land (the home page's
link to the experiment, ``#/experiments/<id>``): MLflow 3.17 opens those on the GenAI views until the
browser has chosen "Model training" once, whatever the experiment's ``mlflow.experimentKind`` tag says.

Prints one line per check (PASS, FAIL or NOTE), then the count; exits 1 when a check failed, 2 when Chromium
or the driver is missing (one line saying what to install) or the sweep or server would not start.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's sweeper, as the sweep and the server run it

from sweeper.base.names import run_url  # noqa: E402
SWEEP = ["-m", "lr=0.001,0.005", "epochs=200"]
GENAI_ONLY = "Evaluation runs"  # a sidebar link of MLflow's GenAI views only
ML_ONLY = "Model registry"  # ... and one of its model-training views only


class Check:
    """The checks' verdicts, one line each as they come."""

    def __init__(self) -> None:
        self.failed = self.passed = 0

    def __call__(self, ok: bool, what: str, detail: str = "") -> bool:
        self.passed, self.failed = self.passed + ok, self.failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'}  {what}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    @staticmethod
    def note(what: str) -> None:
        print(f"NOTE  {what}", flush=True)


def _get(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.read().strip() == b"OK"
    except OSError:
        return False


def sweep(work: Path) -> tuple[str, str | None]:
    """Run the sweep into ``work``; return the store's URI and the address its "browse with:" line gives (if any)."""
    uri = f"sqlite:///{work / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "sweeper", *SWEEP, f"tracking.uri={uri}",
                           f"hydra.sweep.dir={work / 'sweep'}"], cwd=work, env=env, capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("browse with: ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"ui_check: the sweep failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}")
    print(f"sweep: python -m sweeper {' '.join(SWEEP)} -> {line}", flush=True)
    return uri, next((w for w in line.split() if w.startswith(("http://", "https://"))), None)


def server(uri: str, port: int, work: Path) -> subprocess.Popen:
    """``mlflow server`` over the store (its runs' artifacts are files beside it, which it reads as they are)."""
    url = f"http://127.0.0.1:{port}"
    if _up(url):
        raise SystemExit(f"ui_check: --port={port} is taken: a server already answers at {url}; choose another --port")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no GenAI job runner: up in ~5 s
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1", "--artifacts-destination", str(work / "served")],
                            cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not _up(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"ui_check: mlflow server did not start: {proc.stderr.read()[-500:]}")
        time.sleep(0.5)
    return proc


def view(page) -> str:
    """Which of MLflow's views the page shows, by its sidebar (waiting up to 10 s for it)."""
    for _ in range(20):
        genai, ml = (page.get_by_role("link", name=n).count() for n in (GENAI_ONLY, ML_ONLY))
        if genai or ml:
            return "GenAI" if genai else "model training"
        page.wait_for_timeout(500)
    return "unknown"


def route(page) -> str:
    """The UI's route (after ``#``), with workflowType the only query parameter kept."""
    path, _, query = page.url.partition("#")[2].partition("?")
    kept = [q for q in query.split("&") if q.startswith("workflowType=")]
    return path + (f"?{kept[0]}" if kept else "")


def fresh(browser, url: str):
    """A page in a new browser profile (nothing chosen before) at ``url``, the assistant panel closed."""
    page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    page.set_default_timeout(15_000)
    page.goto(url, wait_until="load")
    page.wait_for_timeout(3000)  # the UI routes and redirects after the load
    dismiss(page)
    close = page.locator('button[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()
    return page


def dismiss(page) -> None:
    """Close the pop-over a first visit of the GenAI overview shows (it hides the rest of the page)."""
    got_it = page.get_by_role("button", name="Got it")
    if got_it.count():
        got_it.first.click()


def check_ui(browser, base: str, printed: str | None, shots: Path, check: Check) -> None:
    exp = _get(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes")["experiment"]
    eid = exp["experiment_id"]
    runs = _get(f"{base}/api/2.0/mlflow/runs/search", {"experiment_ids": [eid]})["runs"]
    is_child = {r["info"]["run_id"]: any(t["key"] == "mlflow.parentRunId" for t in r["data"].get("tags", [])) for r in runs}
    (parent,) = [i for i, c in is_child.items() if not c]
    children = {r["info"]["run_id"]: r["info"]["run_name"] for r in runs if is_child[r["info"]["run_id"]]}
    kind = {t["key"]: t["value"] for t in exp.get("tags", [])}.get("mlflow.experimentKind")
    print(f"experiment {eid} (mlflow.experimentKind={kind}), parent run {parent}, {len(children)} runs", flush=True)

    # MLflow's own links, in a browser that never chose a view
    page = fresh(browser, f"{base}/")
    link = page.locator(f'a[href="#/experiments/{eid}"]')
    if check(link.count() > 0, "the home page links to the experiment", f"#/experiments/{eid}"):
        link.first.click()
        page.wait_for_timeout(3000)
        dismiss(page)
        page.screenshot(path=str(shots / "01_home_link.png"))
        check.note(f"the home page's link lands on {route(page)} ({view(page)} views)")
    page = fresh(browser, f"{base}/#/experiments/{eid}")
    page.screenshot(path=str(shots / "02_experiment_bare.png"))
    check.note(f"#/experiments/{eid} lands on {route(page)} ({view(page)} views)")
    page.get_by_text("Model training", exact=True).first.click()  # the choice the browser then remembers
    page.wait_for_timeout(2000)
    page.goto(f"{base}/#/experiments/{eid}", wait_until="load")
    page.wait_for_timeout(3000)
    check("/runs" in page.url and view(page) == "model training",
          "after clicking Model training once, #/experiments/<id> opens the runs table",
          f"{route(page)} ({view(page)} views)")

    # the address the sweep printed (for mlflow ui's port 5000: the same page on this server)
    if not check(printed is not None, "the sweep's last line gives the experiment's address in the UI"):
        printed = f"{base}/#/experiments/{eid}"  # the rest of the checks, from MLflow's own address
    page = fresh(browser, re.sub(r"^https?://[^/]+", base, printed))
    where = route(page)
    check(where == f"/experiments/{eid}/runs?workflowType=machine_learning"
          and view(page) == "model training", "the address the sweep printed opens the runs table (model training)",
          f"{where} ({view(page)} views)")
    row = page.locator(f'.ag-pinned-left-cols-container [row-id="{parent}"]')
    if not check(row.count() == 1, "the runs table shows the sweep's parent run"):
        return
    row.locator('button[data-component-id$="runnamecellrenderer.tsx_46"]').click()  # the ⊞ beside its name
    page.wait_for_timeout(2000)
    page.screenshot(path=str(shots / "03_runs_table.png"))
    cells = {}
    for rid in children:
        cells[rid] = {c.get_attribute("col-id"): c.inner_text() for c in
                      page.locator(f'.ag-center-cols-container [row-id="{rid}"] [role=gridcell]').all()}
    check(all(cells.values()), "expanded, the parent shows its runs", ", ".join(children.values()))
    check(all(all(w in c.get("attributes.`Dataset`", "") for w in ("diabetes (", "Training", "Validation", "Test"))
              for c in cells.values()), "each run's Dataset cell names its data set and its three splits",
          " | ".join(c.get("attributes.`Dataset`", "-").replace("\n", " ") for c in cells.values()))
    check(all(c.get("attributes.`Models`", "").strip() == "model" for c in cells.values()),
          "each run's Models cell shows its logged model", " | ".join(c.get("attributes.`Models`", "-") for c in cells.values()))

    # a run opened from the table
    child = next(iter(children))
    page.locator(f'a[href="#/experiments/{eid}/runs/{child}"]').first.click()
    page.wait_for_timeout(3000)
    check.note(f"a run opened from the table: {route(page)} ({view(page)} views: the table's links "
               "carry no workflowType, so the browser's own choice applies)")
    page.screenshot(path=str(shots / "04_run_overview.png"))
    text = page.inner_text("body")
    logged = re.search(r"Logged models \((\d+)\)", text)
    check(bool(logged) and logged.group(1) == "1" and "Ready" in text, "the run's Overview lists its logged model",
          logged.group(0) if logged else "no 'Logged models' section")
    datasets = text.partition("\nTags\n")[0].rpartition("\nDatasets\n")[2]  # its section, not the sidebar's link
    check(re.fullmatch(r"diabetes \([0-9a-f]{8}\)\nTraining\n\+2", datasets) is not None,
          "the run's Overview lists its data sets (training shown, +2: validation and test)", " ".join(datasets.split()))
    if logged:
        page.get_by_text(logged.group(0), exact=True).first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "04b_run_logged_model.png"))
    page.get_by_text("Model metrics", exact=True).first.click()
    page.get_by_placeholder("Search metric charts").fill("_loss")
    page.wait_for_timeout(3000)
    page.screenshot(path=str(shots / "05_run_loss_charts.png"))
    charts = {c.inner_text().split("\n")[0]: c.locator(".js-plotly-plot path").count()
              for c in page.locator('[data-testid="experiment-view-compare-runs-card"]').all()}
    check({"train_loss", "val_loss"} <= set(charts) and all(charts.values()),
          "Model metrics charts train_loss and val_loss", f"cards {charts} (plot paths each)")
    page.get_by_text("Artifacts", exact=True).first.click()
    page.wait_for_timeout(2000)
    page.screenshot(path=str(shots / "06_run_artifacts.png"))
    files = [f for f in ("config_resolved.yaml", "curves.npz", "test_predictions.csv")
             if page.get_by_text(f, exact=True).count()]
    check(len(files) == 3, "the run's Artifacts tab lists its files", ", ".join(files))

    # the address sweeper prints for a run (a single run's last line, report --run)
    page = fresh(browser, run_url(base, eid, child))
    check(route(page) == f"/experiments/{eid}/runs/{child}?workflowType=machine_learning" and view(page) == "model training"
          and "Logged models (1)" in page.inner_text("body"), "the address sweeper prints for a run opens it on the "
          "model-training views", f"{route(page)} ({view(page)} views)")

    # the parent's plots
    page = fresh(browser, f"{base}/#/experiments/{eid}/runs/{parent}/artifacts?workflowType=machine_learning")
    page.get_by_text("plots", exact=True).first.click()
    for i, name in enumerate(("loss_curves_top.png", "val_metric_vs_lr.png")):
        page.get_by_text(name, exact=True).first.click()
        page.wait_for_timeout(2000)
        page.screenshot(path=str(shots / f"0{7 + i}_parent_{name}"))
        sizes = [img.evaluate("e => [e.naturalWidth, e.naturalHeight]") for img in page.locator("img[src^='blob:']").all()]
        check(any(w > 100 and h > 100 for w, h in sizes), f"the parent's plots/{name} displays",
              f"image {sizes[0][0]}x{sizes[0][1]}" if sizes else "no image")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium", help="the browser binary")
    ap.add_argument("--driver", type=Path, default=Path("/tmp/ui-driver"),
                    help="the folder playwright was installed into with pip --target (default /tmp/ui-driver)")
    ap.add_argument("--port", type=int, default=5077, help="the server's port on 127.0.0.1 (default 5077)")
    ap.add_argument("--shots", type=Path, default=Path("/tmp/ui_shots"), help="where the screenshots go")
    ap.add_argument("--keep", action="store_true", help="keep the store and sweep folder (their path is printed)")
    args = ap.parse_args(argv)
    if not Path(args.chromium).is_file():
        print(f"ui_check: no Chromium at {args.chromium}: apt-get install -y chromium (or pass --chromium PATH)",
              file=sys.stderr)
        return 2
    sys.path.append(str(args.driver))  # after the project's packages: the driver's never shadow them
    try:
        from playwright.sync_api import Error as PlaywrightError, sync_playwright
    except ImportError:
        print(f"ui_check: the playwright package is missing: python -m pip install --target {args.driver} playwright",
              file=sys.stderr)
        return 2
    args.shots.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sweeper-ui-"))
    check, proc = Check(), None
    try:
        uri, printed = sweep(work)
        proc = server(uri, args.port, work)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            try:
                check_ui(browser, f"http://127.0.0.1:{args.port}", printed, args.shots, check)
            except PlaywrightError as e:  # a page that never showed what the next step looks for
                check(False, "the page had what the next step needs", str(e).strip().splitlines()[0])
            finally:
                browser.close()
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if args.keep:
            print(f"store and sweep kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{check.passed} passed, {check.failed} failed; screenshots in {args.shots}")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
