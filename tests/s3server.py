"""A local S3 server for tests: moto's server on 127.0.0.1, and the environment s3fs needs to reach it.

    with s3_server() as endpoint:        # sets FSSPEC_S3_ENDPOINT_URL and dummy AWS keys
        make_bucket("b")                 # then `--out s3://b/x` writes there

The variables are set before anything starts Ray, so embedded Ray workers inherit them; fsspec reads
`FSSPEC_*` variables when it is imported, so its configuration is updated in this process too.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def s3_server():
    exe = Path(sys.executable).with_name("moto_server")
    if not exe.exists() and not shutil.which("moto_server"):
        pytest.skip("moto_server is not installed (pip install 'moto[server]', in the [test] extra)")
    pytest.importorskip("s3fs", reason="s3fs is not installed (in the [test] extra)")
    port = _free_port()
    proc = subprocess.Popen([str(exe if exe.exists() else shutil.which("moto_server")), "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in [*ENV, "FSSPEC_S3_ENDPOINT_URL"]}
    os.environ.update(ENV, FSSPEC_S3_ENDPOINT_URL=endpoint)
    import fsspec.config
    before = dict(fsspec.config.conf.get("s3", {}))
    fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = endpoint
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)
        fsspec.config.conf["s3"] = before
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def s3fs():
    import fsspec
    return fsspec.filesystem("s3", use_listings_cache=False, skip_instance_cache=True)


def make_bucket(name: str) -> None:
    s3fs().mkdir(name)


def download(url: str, to: Path) -> Path:
    """Every object under `url` into the folder `to` (to compare a bucket with a local run)."""
    fs = s3fs()
    root = url.split("://", 1)[1]
    for key in fs.find(root):
        dest = to / key[len(root) + 1:]
        dest.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(key, str(dest))
    return to
