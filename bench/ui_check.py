"""The MLflow UI as a person sees it: a real sweep, ``mlflow server``
over its store, headless Chromium on its pages.

Install, once (neither goes into the project's environment; the browser driver sits in a
folder of its own that this script appends to ``sys.path``, after the project's packages):

    apt-get install -y chromium  # Debian's Chromium: /usr/bin/chromium
    python -m pip install --target /tmp/ui-driver playwright  # the driver; no browser download
                                                              # needed

Run, from the checkout (the sweep and the server run with this
interpreter and this checkout's sweeper):

    python bench/ui_check.py                      # screenshots into /tmp/ui_shots, server on
                                                  # 127.0.0.1:5077
    python bench/ui_check.py --port 5099 --shots /tmp/shots --keep
        # --keep: leave the store and sweep folder
    python bench/ui_check.py --docs               # also writes docs/mlflow_runs.png and
                                                  # docs/mlflow_parent_plots.png

It runs ``python -m sweeper -m lr=0.001,0.005,0.01 depth=1,2 epochs=200`` (6 runs) and, with
``SWEEPER_FAKE_GPU=numpy`` (the GPU path on NumPy), ``device=cpu,gpu lr=0.001,0.005`` into a
fresh SQLite store, serves it, and checks in a fresh browser profile each time: the address each
sweep ends with ("browse with:") opens the runs table on the model-training views with the
sweep's runs, best first, its rank and val_mse columns in view (and the speedup column for the
device sweep), its chart view opening on val_mse and test_mse and charting the best runs first
(no parent run, no baseline metric);
MLflow's own address shows the parent, which expands into its runs, each with its Dataset and
Models cells; a run opened from the table says where it stands (its rank in its description),
lists its logged model and data sets, charts train_loss and val_loss, and lists its artifacts;
the parent's description is a table whose run links carry workflowType; the parent's plots (PNG)
display. It also says where MLflow's own links land (the home page's link to the experiment,
``#/experiments/<id>``): MLflow 3.17 opens those on the GenAI views until the browser has chosen
"Model training" once, whatever the experiment's ``mlflow.experimentKind`` tag says.

Prints one line per check (PASS, FAIL or NOTE), then the count; exits
1 when a check failed, 2 when Chromium or the driver is missing (one
line saying what to install) or the sweep or server would not start.
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

from sweeper.tracking.ui import run_url  # noqa: E402

SWEEP = ["-m", "lr=0.001,0.005,0.01", "depth=1,2", "epochs=200"]
DEVICES = [
    "-m",
    "device=cpu,gpu",
    "lr=0.001,0.005",
    "epochs=200",
    "tracking.experiment=diabetes-devices",
]
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]  # this machine's closed network: no background connections
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


def sweep(
    work: Path, args: list[str] = SWEEP, folder: str = "sweep", **env: str
) -> tuple[str, str | None]:
    """Run a sweep into ``work``; return the store's URI and the
    address its "browse with:" line gives (if any)."""
    uri = f"sqlite:///{work / 'mlflow.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **env,
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper",
            *args,
            f"tracking.uri={uri}",
            f"hydra.sweep.dir={work / folder}",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("browse with: ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(
            f"ui_check: the sweep failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout)[-500:]}"
        )
    print(f"sweep: python -m sweeper {' '.join(args)} -> {line}", flush=True)
    return uri, next((w for w in line.split() if w.startswith(("http://", "https://"))), None)


def server(uri: str, port: int, work: Path) -> subprocess.Popen:
    """``mlflow server`` over the store (its runs' artifacts are files
    beside it, which it reads as they are)."""
    url = f"http://127.0.0.1:{port}"
    if _up(url):
        raise SystemExit(
            f"ui_check: --port={port} is taken: a server already answers at {url}; choose "
            "another --port"
        )
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }  # no GenAI job runner: up in ~5 s
    log = (work / "server.log").open("w")
    # a session of its own: mlflow server runs uvicorn as its child, and stopping it
    # stops both (killing the first alone left uvicorn serving, holding the log pipe)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--artifacts-destination",
            str(work / "served"),
        ],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_S
    while not _up(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise SystemExit(
                f"ui_check: mlflow server did not start in {START_S} s: "
                f"{(work / 'server.log').read_text()[-500:]}"
            )
        time.sleep(0.5)
    return proc


# seconds the server may take to answer (20-50 s on a quiet 2-core machine; minutes under load)
START_S = 300


def stop(proc: subprocess.Popen) -> None:
    """Stop the server and its uvicorn (its process group)."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def view(page) -> str:
    """Which of MLflow's views the page shows, by its sidebar (waiting up to 10 s for it)."""
    for _ in range(20):
        genai, ml = (page.get_by_role("link", name=n).count() for n in (GENAI_ONLY, ML_ONLY))
        if genai or ml:
            return "GenAI" if genai else "model training"
        page.wait_for_timeout(500)
    return "unknown"


# In every page (fresh): a count of the requests it has in flight (fetch and
# XMLHttpRequest), for settle.
COUNT_REQUESTS = """(() => {
  let n = 0;
  window.__sweeperInflight = () => n;
  const f = window.fetch;
  window.fetch = function (...a) { n++; return f.apply(this, a).finally(() => { n--; }); };
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...a) {
    n++; this.addEventListener("loadend", () => { n--; }); return send.apply(this, a);
  };
})()"""

# True once the page has had no request in flight and the same address and content for `quiet` ms.
QUIET = """([quiet]) => {
  const busy = window.__sweeperInflight ? window.__sweeperInflight() : 0;
  const now = performance.now();
  const sig = [location.href, busy, document.body ? document.body.innerText.length : -1,
               document.getElementsByTagName("*").length].join("|");
  if (busy || window.__sweeperSig !== sig) {
    window.__sweeperSig = sig;
    window.__sweeperSince = now;
  }
  return !busy && now - window.__sweeperSince >= quiet;
}"""


def settle(page, quiet_ms: int = 500, limit_ms: int = 20_000) -> None:
    """Wait until the page has done what a step set off (the UI's fetches, the redirects and
    rendering after them): no request in flight and nothing on it changed for ``quiet_ms``
    (MLflow's UI polls, so the browser's network never idles for long). Not a fixed time: as
    short as the page allows, longer on a busy machine; after ``limit_ms`` the step goes on
    and its check says what the page shows."""
    from playwright.sync_api import Error as PlaywrightError  # imported by main() already

    try:
        page.wait_for_function(QUIET, arg=[quiet_ms], polling=100, timeout=limit_ms)
    except PlaywrightError:  # a timeout (still busy) or a page that went on: the next check says
        pass


def new_image(page, before: list[str]) -> list[list[int]]:
    """The size of each image the artifact viewer shows that was not among ``before`` (their
    ``src``), waiting until one has loaded (or the page's timeout)."""
    from playwright.sync_api import Error as PlaywrightError  # imported by main() already

    shown = "img[src^='blob:']"
    try:
        page.wait_for_function(
            "([sel, old]) => [...document.querySelectorAll(sel)].some("
            "e => !old.includes(e.src) && e.complete && e.naturalWidth > 0)",
            arg=[shown, before],
        )
    except PlaywrightError:  # none came: the check that follows says so
        return []
    return [
        img.evaluate("e => [e.naturalWidth, e.naturalHeight]")
        for img in page.locator(shown).all()
        if img.get_attribute("src") not in before
    ]


def images(page) -> list[str]:
    """The ``src`` of each image the artifact viewer shows now."""
    return [img.get_attribute("src") for img in page.locator("img[src^='blob:']").all()]


def route(page) -> str:
    """The UI's route (after ``#``), with workflowType the only query parameter kept."""
    path, _, query = page.url.partition("#")[2].partition("?")
    kept = [q for q in query.split("&") if q.startswith("workflowType=")]
    return path + (f"?{kept[0]}" if kept else "")


def fresh(browser, url: str):
    """A page in a new browser profile (nothing chosen before) at
    ``url``, the assistant panel closed."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(COUNT_REQUESTS)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(url, wait_until="load")
    settle(page)  # the UI routes and redirects after the load
    dismiss(page)
    close = page.locator('button[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()
    return page


def dismiss(page) -> None:
    """Close the pop-over a first visit of the GenAI overview shows
    (it hides the rest of the page)."""
    got_it = page.get_by_role("button", name="Got it")
    if got_it.count():
        got_it.first.click()


def sweep_runs(base: str, experiment: str) -> tuple[str, str, dict[str, dict]]:
    """The experiment's id, its one parent run and its children (id →
    the run as the REST API gives it)."""
    exp = _get(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name={experiment}")[
        "experiment"
    ]
    runs = _get(
        f"{base}/api/2.0/mlflow/runs/search",
        {"experiment_ids": [exp["experiment_id"]], "max_results": 1000},
    )["runs"]
    tags = {
        r["info"]["run_id"]: {t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs
    }
    (parent,) = [i for i, t in tags.items() if "mlflow.parentRunId" not in t]
    return (
        exp["experiment_id"],
        parent,
        {
            r["info"]["run_id"]: {**r, "tags": tags[r["info"]["run_id"]]}
            for r in runs
            if "mlflow.parentRunId" in tags[r["info"]["run_id"]]
        },
    )


def rows_of(page) -> list[str]:
    """The run ids of the table's rows, top first (waiting up to 60 s for the first)."""
    rows = page.locator(".ag-pinned-left-cols-container [row-id]")
    rows.first.wait_for(timeout=60_000)
    return [r.get_attribute("row-id") for r in rows.all()]


def in_view(page, col: str) -> bool:
    """Whether the runs table's column ``col`` has its header on screen (no scrolling sideways)."""
    head = page.locator(f'.ag-header-cell[col-id="{col}"]')
    box = head.first.bounding_box() if head.count() else None
    return bool(box) and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]


def check_answer(
    browser,
    base: str,
    printed: str | None,
    experiment: str,
    shots: Path,
    check: Check,
    metric: str = "val_mse",
    speedup: bool = False,
) -> None:
    """The address a sweep printed, in a fresh profile: its runs, best first, the
    columns that answer it in view; its chart view charting the best runs first."""
    eid, parent, children = sweep_runs(base, experiment)
    best = _get(f"{base}/api/2.0/mlflow/runs/get?run_id={parent}")["run"]["data"]
    best = {t["key"]: t["value"] for t in best.get("tags", [])}["best_run_id"]
    if not check(
        printed is not None, f"{experiment}: the sweep's last line gives an address in the UI"
    ):
        return
    page = fresh(browser, re.sub(r"^https?://[^/]+", base, printed))
    ids = rows_of(page)
    score = {
        i: next((m["value"] for m in r["data"]["metrics"] if m["key"] == metric), None)
        for i, r in children.items()
    }

    # the best run, or one that ties it exactly (a CPU and a GPU twin)
    def best_first(
        rows: list[str],
    ) -> bool:
        return (
            bool(rows)
            and score.get(rows[0]) == score[best]
            and best in [r for r in rows if score.get(r) == score[best]]
        )

    page.screenshot(path=str(shots / f"10_{experiment}_printed_address.png"))
    check(
        route(page) == f"/experiments/{eid}/runs?workflowType=machine_learning"
        and view(page) == "model training",
        f"{experiment}: the printed address opens the runs table (model training)",
        f"{route(page)} ({view(page)} views)",
    )
    check(
        best_first(ids) and set(ids) == set(children),
        f"{experiment}: it lists the sweep's {len(children)} runs, the best first, and no parent",
        f"first {children.get(ids[0], {}).get('info', {}).get('run_name')}, "
        f"{len(ids)} rows, parent listed: {parent in ids}",
    )
    col = f"metrics.`{metric}`"
    cell = page.locator(f'.ag-center-cols-container [row-id="{best}"] [col-id="{col}"]')
    value = next(m["value"] for m in children[best]["data"]["metrics"] if m["key"] == metric)
    shown = cell.inner_text().strip() if cell.count() else ""
    check(
        in_view(page, col)
        and shown
        and abs(float(shown.rstrip(".…")) - value) <= 1e-3 * abs(value) + 1e-6,
        f"{experiment}: its {metric} column is in view, the best run's value in the first row",
        f"{shown} ({value:.6g})",
    )
    rank = page.locator(f'.ag-center-cols-container [row-id="{best}"] [col-id="metrics.`rank`"]')
    check(
        in_view(page, "metrics.`rank`") and rank.count() and rank.inner_text().strip() == "1",
        f"{experiment}: its rank column is in view, 1 in the first row",
    )
    if speedup:
        check(
            in_view(page, "metrics.`speedup`"),
            f"{experiment}: devices were swept: its speedup column is in view",
        )
    page.locator('label:has(input[value="CHART"])').first.click()
    page.locator('[data-testid="experiment-view-compare-runs-card"]').first.wait_for()
    settle(page)
    page.screenshot(path=str(shots / f"11_{experiment}_chart_view.png"))
    listed = rows_of(page)
    cards = [
        c.inner_text().split("\n")[0]
        for c in page.locator('[data-testid="experiment-view-compare-runs-card"]').all()
    ]
    check(
        best_first(listed)
        and parent not in listed
        and cards[:2] == ["val_mse", "test_mse"]
        and not any(c.startswith("baseline") for c in cards),
        f"{experiment}: the chart view opens on the ranking's metrics (val_mse, test_mse first) "
        "and charts the best runs first, no parent's baseline metric",
        f"first {children.get(listed[0], {}).get('info', {}).get('run_name')}; charts "
        f"{', '.join(cards[:4])}, …",
    )


def check_ui(
    browser, base: str, printed: str | None, shots: Path, check: Check, docs: Path | None = None
) -> None:
    eid, parent, children = sweep_runs(base, "diabetes")
    exp = _get(f"{base}/api/2.0/mlflow/experiments/get?experiment_id={eid}")["experiment"]
    kind = {t["key"]: t["value"] for t in exp.get("tags", [])}.get("mlflow.experimentKind")
    print(
        f"experiment {eid} (mlflow.experimentKind={kind}), parent run {parent}, {len(children)} "
        "runs",
        flush=True,
    )

    # the address the sweep printed (for mlflow ui's port 5000: the same page on this server)
    check_answer(browser, base, printed, "diabetes", shots, check)
    if docs is not None:
        shutil.copy(shots / "10_diabetes_printed_address.png", docs / "mlflow_runs.png")

    # MLflow's own links, in a browser that never chose a view
    page = fresh(browser, f"{base}/")
    link = page.locator(f'a[href="#/experiments/{eid}"]')
    if check(link.count() > 0, "the home page links to the experiment", f"#/experiments/{eid}"):
        link.first.click()
        settle(page)
        dismiss(page)
        page.screenshot(path=str(shots / "01_home_link.png"))
        check.note(f"the home page's link lands on {route(page)} ({view(page)} views)")
    page = fresh(browser, f"{base}/#/experiments/{eid}")
    page.screenshot(path=str(shots / "02_experiment_bare.png"))
    check.note(f"#/experiments/{eid} lands on {route(page)} ({view(page)} views)")
    # the choice the browser then remembers
    page.get_by_text("Model training", exact=True).first.click()
    settle(page)
    page.goto(f"{base}/#/experiments/{eid}", wait_until="load")
    settle(page)
    check(
        "/runs" in page.url and view(page) == "model training",
        "after clicking Model training once, #/experiments/<id> opens the runs table",
        f"{route(page)} ({view(page)} views)",
    )

    # MLflow's own runs table (no search, newest first): the parent, expanded into its runs
    page = fresh(browser, f"{base}/#/experiments/{eid}/runs?workflowType=machine_learning")
    rows_of(page)
    row = page.locator(f'.ag-pinned-left-cols-container [row-id="{parent}"]')
    if not check(row.count() == 1, "MLflow's own runs table shows the sweep's parent run"):
        return
    # the ⊞ beside its name
    row.locator('button[data-component-id$="runnamecellrenderer.tsx_46"]').click()
    page.locator(f'.ag-center-cols-container [row-id="{next(iter(children))}"]').first.wait_for()
    settle(page)
    page.screenshot(path=str(shots / "03_runs_table.png"))
    cells = {}
    for rid in children:
        cells[rid] = {
            c.get_attribute("col-id"): c.inner_text()
            for c in page.locator(
                f'.ag-center-cols-container [row-id="{rid}"] [role=gridcell]'
            ).all()
        }
    check(
        all(cells.values()),
        "expanded, the parent shows its runs",
        ", ".join(c["info"]["run_name"] for c in children.values()),
    )
    check(
        all(
            all(
                w in c.get("attributes.`Dataset`", "")
                for w in ("diabetes (", "Training", "Validation", "Test")
            )
            for c in cells.values()
        ),
        "each run's Dataset cell names its data set and its three splits",
        " | ".join(
            c.get("attributes.`Dataset`", "-").replace("\n", " ") for c in list(cells.values())[:2]
        )
        + " …",
    )
    check(
        all(c.get("attributes.`Models`", "").strip() == "model" for c in cells.values()),
        "each run's Models cell shows its logged model",
        " | ".join(c.get("attributes.`Models`", "-") for c in cells.values()),
    )

    # a run opened from the table
    child = next(iter(children))
    page.locator(f'a[href="#/experiments/{eid}/runs/{child}"]').first.click()
    settle(page)
    check.note(
        f"a run opened from the table: {route(page)} ({view(page)} views: the table's links "
        "carry no workflowType, so the browser's own choice applies)"
    )
    for _ in range(60):  # the run's logged models load after its page
        if re.search(r"Logged models \([1-9]", page.inner_text("body")):
            break
        page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "04_run_overview.png"))
    text = page.inner_text("body")
    rank = int(next(m["value"] for m in children[child]["data"]["metrics"] if m["key"] == "rank"))
    check(
        f"rank {rank} of {len(children)} by val_mse" in text,
        "the run's description says where it stands",
        next(
            (ln for ln in text.splitlines() if ln.startswith(f"rank {rank} of")), "no 'rank' line"
        ),
    )
    logged = re.search(r"Logged models \((\d+)\)", text)
    check(
        bool(logged) and logged.group(1) == "1" and "Ready" in text,
        "the run's Overview lists its logged model",
        logged.group(0) if logged else "no 'Logged models' section",
    )
    # its section, not the sidebar's link
    datasets = text.partition("\nTags\n")[0].rpartition("\nDatasets\n")[2]
    check(
        re.fullmatch(r"diabetes \([0-9a-f]{8}\)\nTraining\n\+2", datasets) is not None,
        "the run's Overview lists its data sets (training shown, +2: validation and test)",
        " ".join(datasets.split()),
    )
    if logged:
        page.get_by_text(logged.group(0), exact=True).first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "04b_run_logged_model.png"))
    page.get_by_text("Model metrics", exact=True).first.click()
    page.get_by_placeholder("Search metric charts").fill("_loss")
    settle(page)
    page.screenshot(path=str(shots / "05_run_loss_charts.png"))
    charts = {
        c.inner_text().split("\n")[0]: c.locator(".js-plotly-plot path").count()
        for c in page.locator('[data-testid="experiment-view-compare-runs-card"]').all()
    }
    check(
        {"train_loss", "val_loss"} <= set(charts) and all(charts.values()),
        "Model metrics charts train_loss and val_loss",
        f"cards {charts} (plot paths each)",
    )
    page.get_by_text("Artifacts", exact=True).first.click()
    settle(page)
    page.screenshot(path=str(shots / "06_run_artifacts.png"))
    files = [
        f
        for f in ("config_resolved.yaml", "curves.npz", "test_predictions.csv")
        if page.get_by_text(f, exact=True).count()
    ]
    check(len(files) == 3, "the run's Artifacts tab lists its files", ", ".join(files))

    # the address sweeper prints for a run (a single run's last line, report --run)
    page = fresh(browser, run_url(base, eid, child))
    page.get_by_text("Logged models (1)").first.wait_for(timeout=30_000)
    check(
        route(page) == f"/experiments/{eid}/runs/{child}?workflowType=machine_learning"
        and view(page) == "model training",
        "the address sweeper prints for a run opens it on the model-training views",
        f"{route(page)} ({view(page)} views)",
    )

    # the parent's description: a table, its run links on the model-training views
    page = fresh(browser, run_url(base, eid, parent))
    more = page.get_by_text("Show more", exact=True)
    if more.count():
        more.first.click()
        settle(page)
    page.screenshot(path=str(shots / "07_parent_description.png"), full_page=True)
    table = page.locator("table:has(th:text-is('val_mse'))")
    body = table.locator("tbody tr").count() if table.count() else 0
    # the description's markdown: the best run's line and the table
    desc = table.first.locator("xpath=..")
    links = (
        [a.get_attribute("href") for a in desc.locator('a[href^="#/experiments/"]').all()]
        if table.count()
        else []
    )
    refs = table.locator("tbody tr:has-text('[baseline]')").count() if table.count() else 0
    check(
        body - refs == len(children) and refs >= 1,
        "the parent's description is a table: a row a run, and one a baseline",
        f"{body} rows, {refs} baselines",
    )
    check(
        len(links) >= len(children) + 1
        and all(h.endswith("workflowType=machine_learning") for h in links),
        "every run link in the parent's description carries workflowType=machine_learning",
        f"{len(links)} links",
    )

    # the parent's plots
    page = fresh(
        browser, f"{base}/#/experiments/{eid}/runs/{parent}/artifacts?workflowType=machine_learning"
    )
    page.get_by_text("plots", exact=True).first.click()
    for i, name in enumerate(
        (
            "loss_curves_top.png",
            "val_metric_vs_lr.png",
            "history.png",
            "importance.png",
            "parallel_coordinates.png",
        )
    ):
        before = images(page)
        page.get_by_text(name, exact=True).first.click()
        sizes = new_image(page, before)  # this file's image, not the one shown before
        page.screenshot(
            path=str(
                shots / f"0{8 + i}_parent_{name}" if i < 2 else shots / f"{8 + i}_parent_{name}"
            )
        )
        check(
            any(w > 100 and h > 100 for w, h in sizes),
            f"the parent's plots/{name} displays",
            f"image {sizes[0][0]}x{sizes[0][1]}" if sizes else "no image",
        )
        if docs is not None and name == "importance.png":
            page.screenshot(path=str(docs / "mlflow_parent_plots.png"))


def check_devices(browser, base: str, printed: str | None, shots: Path, check: Check) -> None:
    """The device sweep: its address shows the speedup column; its parent's time plot displays."""
    check_answer(browser, base, printed, "diabetes-devices", shots, check, speedup=True)
    eid, parent, _ = sweep_runs(base, "diabetes-devices")
    page = fresh(
        browser, f"{base}/#/experiments/{eid}/runs/{parent}/artifacts?workflowType=machine_learning"
    )
    page.get_by_text("plots", exact=True).first.click()
    before = images(page)
    page.get_by_text("time_and_speedup.png", exact=True).first.click()
    sizes = new_image(page, before)
    page.screenshot(path=str(shots / "13_devices_time_and_speedup.png"))
    check(
        any(w > 100 and h > 100 for w, h in sizes),
        "the device sweep's plots/time_and_speedup.png displays",
        f"image {sizes[0][0]}x{sizes[0][1]}" if sizes else "no image",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument(
        "--chromium",
        default=shutil.which("chromium") or "/usr/bin/chromium",
        help="the browser binary",
    )
    ap.add_argument(
        "--driver",
        type=Path,
        default=Path("/tmp/ui-driver"),
        help="the folder playwright was installed into with pip --target (default /tmp/ui-driver)",
    )
    ap.add_argument(
        "--port", type=int, default=5077, help="the server's port on 127.0.0.1 (default 5077)"
    )
    ap.add_argument(
        "--shots", type=Path, default=Path("/tmp/ui_shots"), help="where the screenshots go"
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the store and sweep folder (their path is printed)",
    )
    ap.add_argument(
        "--docs",
        action="store_true",
        help="write docs/mlflow_runs.png and docs/mlflow_parent_plots.png "
        "from the screenshots (the pictures of the manual, from the current code)",
    )
    args = ap.parse_args(argv)
    if not Path(args.chromium).is_file():
        print(
            f"ui_check: no Chromium at {args.chromium}: apt-get install -y chromium (or pass "
            "--chromium PATH)",
            file=sys.stderr,
        )
        return 2
    # after the project's packages: the driver's never shadow them
    sys.path.append(str(args.driver))
    try:
        from playwright.sync_api import Error as PlaywrightError, sync_playwright
    except ImportError:
        print(
            "ui_check: the playwright package is missing: python -m pip install --target "
            f"{args.driver} playwright",
            file=sys.stderr,
        )
        return 2
    args.shots.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sweeper-ui-"))
    check, proc = Check(), None
    try:
        uri, printed = sweep(work)
        # the GPU path on NumPy
        _, on_devices = sweep(work, DEVICES, "devices", SWEEPER_FAKE_GPU="numpy")
        proc = server(uri, args.port, work)
        base = f"http://127.0.0.1:{args.port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_FLAGS)
            try:
                for part in (
                    lambda: check_ui(
                        browser,
                        base,
                        printed,
                        args.shots,
                        check,
                        ROOT / "docs" if args.docs else None,
                    ),
                    lambda: check_devices(browser, base, on_devices, args.shots, check),
                ):
                    try:
                        part()
                    # a page that never showed what the next step looks for
                    except PlaywrightError as e:
                        check(
                            False,
                            "the page had what the next step needs",
                            str(e).strip().splitlines()[0],
                        )
            finally:
                browser.close()
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        if proc is not None:
            stop(proc)
        if args.keep:
            print(f"store and sweep kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{check.passed} passed, {check.failed} failed; screenshots in {args.shots}")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
