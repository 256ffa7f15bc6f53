"""A password in a tracking URI works as MLflow's client takes it and never shows in what sweeper writes (issue 55,
finding 4): ``http://alice:s3cr3tPW@host`` is masked ``http://alice:***@host`` in every line, tag and file."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import all_runs, command, mlflow_server
from sweeper import tracking

PASSWORD = "s3cr3tPW"


@pytest.fixture
def guarded_health():
    """A server whose ``GET /health`` answers OK only to HTTP basic authentication as alice; yields its address and
    the Authorization headers it saw."""
    seen: list[str | None] = []
    expected = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            seen.append(self.headers.get("Authorization"))
            ok = self.path == "/health" and self.headers.get("Authorization") == expected
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(b"OK" if ok else b"unauthorized")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_health_check_sends_the_uris_credentials_as_mlflow_does(guarded_health):
    """Before: urllib read ``alice:s3cr3tPW@127.0.0.1`` as the host's name: 'Name or service not known', the
    password printed in that line."""
    address, seen = guarded_health
    tracking.check_server(f"http://alice:{PASSWORD}@{address}")  # answers: no error
    assert seen == ["Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()]
    # a wrong password: the server's answer, no password shown
    with pytest.raises(tracking.TrackingError) as refused:
        tracking.check_server(f"http://alice:wrong@{address}")
    assert "401" in str(refused.value)


def test_masked_hides_every_password_and_unmasked_gives_it_back_in_this_process():
    from sweeper.base.output import masked, unmasked

    text = (
        'tracking.uri=http://alice:s3cr3tPW@127.0.0.1:5000 "postgresql+psycopg2://bob:pgS3cret@db:5432/ml" '
        "'https://carol:p@ss@host/x' http://dave@host sqlite:////tmp/x.db"
    )
    assert masked(text) == (
        'tracking.uri=http://alice:***@127.0.0.1:5000 "postgresql+psycopg2://bob:***@db:5432/ml" '
        "'https://carol:***@host/x' http://dave@host sqlite:////tmp/x.db"
    )
    assert masked(masked(text)) == masked(text)
    assert unmasked("http://alice:***@127.0.0.1:5000") == "http://alice:s3cr3tPW@127.0.0.1:5000"
    # masked by another process (a sweep folder's result.json read by upload): MLflow's environment credentials
    assert unmasked("http://zed:***@elsewhere:5000") == "http://elsewhere:5000"


@pytest.mark.parametrize(
    "uri",
    [
        "http://bob:pgS3cret@127.0.0.1:9",  # a closed port: the health check's line
        # MLflow's own error's line
        pytest.param("postgresql://bob:pgS3cret@127.0.0.1:9/db", marks=pytest.mark.slow),
    ],
)
def test_a_refused_uri_is_one_line_without_its_password(tmp_path, uri):
    """Before: ``sweeper: error: tracking.uri=postgresql://bob:pgS3cret@... cannot be used`` (the password shown)."""
    out = command(
        "sweeper",
        f"tracking.uri={uri}",
        "epochs=10",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 2
    assert "pgS3cret" not in out.stdout + out.stderr
    assert f"tracking.uri={uri.replace('pgS3cret', '***')} " in out.stderr, out.stderr


def _files_holding(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.slow
def test_a_sweep_to_a_server_with_credentials_works_and_writes_no_password(tmp_path):
    """A real server, a sweep whose tracking URI carries a user and password: the runs are there, and neither the
    output, the runs' tags and params, nor any file of the sweep folder or the store holds the password."""
    db = tmp_path / "server" / "mlflow.db"
    db.parent.mkdir()
    with mlflow_server(db) as url:
        uri = url.replace("http://", f"http://alice:{PASSWORD}@")
        out = command(
            "sweeper",
            "-m",
            "lr=0.01,0.02",
            "epochs=30",
            "log_every=10",
            "tracking=server",
            f"tracking.uri={uri}",
            "baselines=none",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            cwd=tmp_path,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        runs = all_runs(db)
    from sweeper.base.output import masked

    assert PASSWORD not in out.stdout + out.stderr
    # the parent and its two children
    assert len([r for r in runs if r.info.status == "FINISHED"]) == 3
    shown = masked(uri)
    parent = next(r for r in runs if "sweep_argv" in r.data.tags)
    assert shown in parent.data.tags["overrides"] and f"tracking.uri={shown}" in json.loads(
        parent.data.tags["sweep_argv"]
    )
    for r in runs:
        values = [*r.data.tags.values(), *r.data.params.values()]
        assert not [v for v in values if PASSWORD in v], r.data.tags
        # a child: its command line and settings name the store, masked
        if "fingerprint" in r.data.tags:
            # as Hydra escapes a job's override
            assert ":***@127.0.0.1" in r.data.tags["sweeper.rerun"]
            assert r.data.tags["config.tracking.uri"] == shown
    assert _files_holding(tmp_path, PASSWORD) == []
