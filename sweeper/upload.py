"""``python -m sweeper.upload DIR``: log the results that a failing tracking server could not take.

A job whose tracking failed (server down mid-sweep, after the bounded retries) keeps everything
in its folder — result.json with ``pending_upload``, the loss curves, the resolved config, the
predictions and the model — and this command logs each such job as a new MLflow run (under the
sweep's parent when the sweep has one). The run that the job had started, if any, is marked
FAILED with a pointer to its replacement. DIR is a sweep folder or one job's folder.

    python -m sweeper.upload multirun/2026-11-29/21-30-00 [--tracking-uri URI]
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from sweeper.contract.helptext import Parser, describe
from sweeper import tracking
from sweeper.base import process, stop
from sweeper.base.output import masked
from sweeper.base.tags import CONFIG_FINGERPRINT, DATA_SHA256, HOST, REPLACED_BY
from sweeper.base.files import CURVES_FILE, RESULT_FILE, SWEEP_FILE
from sweeper.base.fmt import label
from sweeper.job import sweepdir
from sweeper.tracking import ending
from sweeper.tracking.writer import RECORDING, recording, write_result


__all__ = ["main", "pending", "upload"]

STATUSES = ("FINISHED", "FAILED", "KILLED")
UPLOAD_KEYS = MappingProxyType(
    {"config": dict, "fingerprint": str, "device": str}
)  # besides sweepdir.RESULT_KEYS


def pending(folder: Path, uri: str | None = None) -> list[Path]:
    """The result.json files under ``folder`` (itself or its jobs) still waiting
    for an upload (to ``uri``: one uploaded to another store is still pending
    for its own, not for that one), each checked whole first: a malformed one
    refuses the command (SweepFileError) before any is uploaded."""
    paths = (
        [folder / RESULT_FILE]
        if (folder / RESULT_FILE).is_file()
        else sorted(folder.glob(f"*/{RESULT_FILE}"))
    )
    results = {p: sweepdir.read_result(p) for p in paths}
    for p, r in results.items():
        if not isinstance(r.get("pending_upload", False), bool):
            raise sweepdir.SweepFileError(
                f"{p}: its pending_upload is {json.dumps(r['pending_upload'])[:60]}, "
                "expected true or false: restore it, or move it away"
            )
    todo = [
        p
        for p, r in results.items()
        if r.get("pending_upload")
        and not recording(r)  # not a live sweep's
        and masked(uri or r["tracking_uri"]) not in (r.get(UPLOADED_TO) or {})
    ]
    for p in todo:
        _check(p, results[p])
    return todo


def _check(path: Path, r: dict[str, Any]) -> None:
    """SweepFileError (one line) unless ``r`` holds what an upload logs: its config,
    fingerprint and device, an ended status, and its artifacts as result.json writes them."""

    def bad(what: str) -> sweepdir.SweepFileError:
        return sweepdir.SweepFileError(f"{path}: {what}: restore it, or move it away")

    for key, kind in UPLOAD_KEYS.items():
        if not isinstance(r.get(key), kind):
            raise bad(
                f"its {key} is {json.dumps(r.get(key))[:60]}, expected {kind.__name__} (an "
                "upload logs it)"
            )
    if r["status"] not in STATUSES:
        raise bad(
            f"its status is {json.dumps(r['status'])[:60]}, expected one of {', '.join(STATUSES)}"
        )
    art = r.get("artifacts", {"files": []})
    files = art.get("files") if isinstance(art, dict) else None
    models = art.get("models", art.get("folders", {})) if isinstance(art, dict) else None
    if not (
        isinstance(files, list)
        and all(isinstance(f, str) for f in files)
        and isinstance(models, dict)
    ):
        raise bad(
            f'its artifacts is {json.dumps(art)[:60]}, expected {{"files": [names], "models": '
            "{name: folder}}"
        )


def upload(path: Path, uri: str | None = None) -> str:
    """Log one pending job as a new run; mark its result.json uploaded; return the new run id."""
    r: dict[str, Any] = sweepdir.read_result(path)
    _check(path, r)
    job, sweep_dir = path.parent, path.parent.parent
    uri = uri or r["tracking_uri"]
    c = tracking.open_store(uri)
    experiment = tracking.experiment_id(c, r["experiment"], uri)
    # an upload that failed half-way (a full disk): its run goes, this one replaces it
    if r.get(UPLOADING):
        try:
            c.delete_run(r[UPLOADING])
        except tracking.UNREACHABLE:
            pass  # it never reached this store
    is_sweep = (sweep_dir / SWEEP_FILE).is_file()
    parent, own = (
        _parent(c, sweep_dir, uri, experiment, r)
        if is_sweep
        else (None, masked(uri) == masked(r["tracking_uri"]))
    )
    name = label(r["overrides"], r["device"], sweepdir.swept(sweep_dir) if is_sweep else None)
    params, settings = tracking.split_params(r["config"])
    tags = {
        "device": r["device"],
        "fingerprint": r["fingerprint"],
        "overrides": " ".join(r["overrides"]),
        "uploaded_from": str(job),
        "hydra.job_dir": str(job.resolve()),
        **settings,
        **tracking.source_tags(["python", "-m", "sweeper", *r["overrides"]]),
    }
    if r.get("task"):
        tags["task"] = r["task"]
    # what its file held
    tags |= {k: r[k] for k in (DATA_SHA256, CONFIG_FINGERPRINT) if isinstance(r.get(k), str)}
    new = tracking.start_run(c, experiment, name, tags, params, parent)
    # a retry after a failure below deletes it instead of adding a second
    write_result(path, r | {UPLOADING: new})

    try:
        with np.load(job / CURVES_FILE) as z:
            curves = {
                name: (z[f"{name}_steps"], z[f"{name}_values"])
                for name in ("train_loss", "val_loss")
            }
        art = r.get("artifacts", {"files": []})
        # result.json files of before logged models: "folders"
        models = art.get("models", art.get("folders", {}))
        end = dict(
            metrics=r["metrics"],
            curves=curves,
            artifacts=[job / f for f in art["files"]],
            models={k: job / v for k, v in models.items()},
            tags={"failure_reason": r["reason"]} if r.get("reason") else None,
            status=r["status"],
            curve_points=r["config"].get("tracking", {}).get("curve_points", tracking.CURVE_POINTS),
        )
        ending.end_runs(c, [ending.Ending(new, end)])
    # not left RUNNING: FAILED with the reason (a retry deletes it: UPLOADING)
    except BaseException as e:
        # the store that failed the upload may refuse this too
        tracking.mark_ended(c, new, "FAILED", f"upload failed: {tracking.first_line(e)}")
        raise
    # another store: the job's own still lacks the run, and a later upload there still adds it
    if not own:
        r.pop(UPLOADING, None)
        write_result(path, r | {UPLOADED_TO: {**(r.get(UPLOADED_TO) or {}), uri: new}})
        return new
    # the run the job had started before the server failed
    if isinstance(r.get("run_id"), str) and r["run_id"]:
        # a stub: counted neither finished nor failed (publish.tally)
        reason = f"tracking failed mid-run; re-uploaded as run {new}"
        # where the store has it: it may have lived on another server, or never reached this one
        tracking.mark_ended(c, r["run_id"], "FAILED", reason, {REPLACED_BY: new})
    r |= {"run_id": new, "pending_upload": False, "uploaded": True}
    r.pop(RECORDING, None)
    r.pop(UPLOADING, None)
    write_result(path, r)
    return new


def _parent(
    c: Any, sweep_dir: Path, uri: str, experiment_id: str, r: dict[str, Any]
) -> tuple[str | None, bool]:
    """The parent run the job's upload goes under in the store ``uri`` (client ``c``), and
    whether that store is the job's own. The sweep's parent there when sweep.json names one; the
    sweep's own parent when ``c`` finds it (the same store under another address); else, for a
    sweep that has a parent in its own store, a parent made here for the uploads (named and
    tagged as the sweep's, added to sweep.json, so the next job and ``reclose`` find it)."""
    name, own = r["experiment"], masked(uri) == masked(r["tracking_uri"])
    here = sweepdir.parent_run_id(sweep_dir, uri, name)
    if here and _run(c, here) is not None:
        return here, own
    original = None if own else sweepdir.parent_run_id(sweep_dir, r["tracking_uri"], name)
    if original and _run(c, original) is not None:
        return original, True  # the sweep's own store, reached by another address
    if here is None and original is None:
        return None, own
    # another store, or the sweep's own made anew (the file was
    # deleted during the sweep): a parent for the uploads
    state = sweepdir.sweep_state(sweep_dir)
    tags = {
        "sweep_dir": str(sweep_dir),
        "n_jobs": sum(1 for x in sweepdir.results(sweep_dir) if x["experiment"] == name),
        "uploaded_from": str(sweep_dir),
        HOST: socket.gethostname(),
        **process.identity(),
    }
    tags |= (
        {"parent_in_own_store": f"{original} in {r['tracking_uri']}"}
        if original
        else {"parent_gone": here}
    )
    # the sweep's command, as its own parent has it: advise and resume read it
    if isinstance(state.get("argv"), list):
        tags |= {"sweep_argv": json.dumps(state["argv"]), "sweeper": str(state.get("sweeper"))}
    run_id = tracking.start_run(
        c, experiment_id, f"sweep {sweep_dir.parent.name}/{sweep_dir.name} (uploaded)", tags, {}
    )
    kept = [p for p in state["parents"] if not (p["uri"] == uri and p["experiment"] == name)]
    state |= {
        "parents": [
            *kept,
            {
                "uri": uri,
                "experiment": name,
                "run_id": run_id,
                "experiment_id": experiment_id,
                "uploaded": True,
            },
        ]
    }
    # the file at that path now: the one summary finds there
    if own and isinstance(state.get("stores"), dict):
        state["stores"] = {**state["stores"], uri: tracking.identity(uri)}
    write_result(sweep_dir / SWEEP_FILE, state)
    return run_id, own


def _run(c: Any, run_id: str) -> Any:
    """The run ``run_id`` of the store of client ``c``; None where that store lacks it (a
    run of another store: MLflow's RESOURCE_DOES_NOT_EXIST) or cannot be read."""
    try:
        return c.get_run(run_id)
    except tracking.UNREACHABLE:
        return None


def reclose_parents(sweep_dirs: set[Path], uri: str | None = None, left_open: bool = False) -> None:
    """Close each sweep's parent run again with the status its runs now support (a
    parent KILLED for runs that the upload recovered becomes FINISHED). ``left_open``:
    only a parent an interrupted upload made (``uploaded`` in sweep.json) and left
    RUNNING, in a store file that exists (nothing is created for it); each is said."""
    # lazy: saves ~90 ms at this module's import (measured)
    from sweeper.insight import publish

    for sweep_dir in sorted(d for d in sweep_dirs if (d / SWEEP_FILE).is_file()):
        for p in sweepdir.sweep_state(sweep_dir)["parents"]:
            target, db = uri or p["uri"], tracking.sqlite_path(p["uri"])
            if left_open and not (
                p.get("uploaded") and target == p["uri"] and (db is None or db.is_file())
            ):
                continue
            c = tracking.client(target)
            run = _run(c, p["run_id"])
            if run is None:
                continue  # a parent in another store than the one uploaded to: not touched
            if left_open and run.info.status != "RUNNING":
                continue
            status = publish.reclose(c, p["run_id"])
            if left_open:
                print(f"parent run {p['run_id']}, left RUNNING by an interrupted upload: {status}")


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m sweeper.upload", description=describe(__doc__))
    ap.add_argument(
        "folder", type=Path, help="a sweep folder (hydra.sweep.dir) or one job's folder"
    )
    ap.add_argument(
        "--tracking-uri", help="log there instead of the tracking.uri each job was given"
    )
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        what = "does not exist" if not args.folder.exists() else "is not a folder"
        print(
            f"sweeper: error: {args.folder} {what}: expected a sweep folder (hydra.sweep.dir) or "
            "one job's folder",
            file=sys.stderr,
        )
        return 2
    todo: list[Path] = []
    # the command's one boundary: its outcome is decided here, each error said in one line
    try:
        todo = pending(args.folder, args.tracking_uri)
        if not todo:
            print(f"nothing to upload under {args.folder}: no result.json is pending")
            reclose_parents({args.folder}, args.tracking_uri, left_open=True)
            return 0
        for path in todo:
            run_id = upload(path, args.tracking_uri)
            r = sweepdir.read_result(path)
            print(
                f"{path.parent}: uploaded as run {run_id}"
                + (
                    f" to {args.tracking_uri}; its own store {r['tracking_uri']} still lacks it "
                    "(python -m sweeper.upload "
                    f"{args.folder} adds it there)"
                    if r.get("pending_upload")
                    else ""
                )
            )
        reclose_parents({p.parent.parent for p in todo}, args.tracking_uri)
    # Ctrl-C, SIGTERM: the parents it made or recovered runs for (if any) are closed, then one
    # line
    except KeyboardInterrupt:
        with stop.ignoring():
            reclose_parents({p.parent.parent for p in todo}, args.tracking_uri)
        raise
    except sweepdir.SweepFileError as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 2
    except (tracking.TrackingError, *tracking.UNREACHABLE) as e:
        print(
            "sweeper: error: "
            f"{tracking.first_line(e) if not isinstance(e, tracking.TrackingError) else e}",
            file=sys.stderr,
        )
        return 2
    return 0


UPLOADING = "uploading"  # result.json's run id of an upload under way (or one that failed half-way)
# result.json's {store: run id} of uploads to another store than the job's own
UPLOADED_TO = "uploaded_to"


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)
