"""Cluster joining without a cluster: where the token comes from, and what the per-node probe finds."""
from __future__ import annotations

import pytest

from curation.errors import CurateError
from curation.runtime import build, cluster


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cluster, "_refresh_ray_auth", lambda: None)  # keep this process's Ray state
    return monkeypatch


def test_token_sources_in_rays_order(clean_env, tmp_path):
    assert cluster.prepare_auth() is None
    import os
    assert "RAY_AUTH_MODE" not in os.environ            # no token: the mode is left alone
    home = tmp_path / "home" / ".ray"
    home.mkdir(parents=True)
    (home / "auth_token").write_text("abc\n")
    assert cluster.prepare_auth() == "~/.ray/auth_token" and os.environ["RAY_AUTH_MODE"] == "token"
    f = tmp_path / "tok"
    f.write_text("x")
    clean_env.setenv("RAY_AUTH_TOKEN_PATH", str(f))
    assert cluster.token_source() == f"RAY_AUTH_TOKEN_PATH={f}"
    clean_env.setenv("RAY_AUTH_TOKEN", "y")
    assert cluster.token_source() == "RAY_AUTH_TOKEN"


def test_explicit_mode_is_respected(clean_env):
    clean_env.setenv("RAY_AUTH_TOKEN", "y")
    clean_env.setenv("RAY_AUTH_MODE", "disabled")
    cluster.prepare_auth()
    import os
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
    assert "RAY_AUTH_MODE=disabled is set" in cluster.auth_help("h:1", "RAY_AUTH_TOKEN")


@pytest.mark.parametrize("content,says", [(None, "cannot be read"), ("  \n", "is empty")])
def test_unreadable_token_path_is_named(clean_env, tmp_path, content, says):
    f = tmp_path / "tok"
    if content is not None:
        f.write_text(content)
    clean_env.setenv("RAY_AUTH_TOKEN_PATH", str(f))
    with pytest.raises(CurateError, match=f"RAY_AUTH_TOKEN_PATH={f} {says}"):
        cluster.prepare_auth()


def test_closed_port_and_malformed_address(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                           # nothing listens there now
    with pytest.raises(CurateError, match=f"nothing answers at the Ray address 127.0.0.1:{port}"):
        cluster.probe(f"127.0.0.1:{port}", None, timeout=2)
    with pytest.raises(CurateError, match="is not host:port"):
        cluster.probe("127.0.0.1", None)
    cluster.probe("auto", None)                          # Ray resolves these itself


def _probe(tmp_path, out, inputs, nonce="n1", seen="n1"):
    check = out / ".nodecheck-x"
    if out.exists():
        check.mkdir()
        (check / "driver").write_text(seen)
    report = cluster.node_probe(str(check), nonce, "node1", inputs)
    return report, cluster.problems(report, build.environment(), out)


def test_node_probe_on_a_fit_node(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    f = tmp_path / "a.jsonl"
    f.write_text("{}\n")
    report, bad = _probe(tmp_path, out, {str(f): 3})
    assert bad == [] and report["out"] == "ok"
    assert (out / ".nodecheck-x" / "node1").read_text() == "n1"   # the file the driver looks for


def test_node_probe_names_each_problem(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    f = tmp_path / "a.jsonl"
    f.write_text("{}\n")
    _, bad = _probe(tmp_path, out, {str(f): 99, str(tmp_path / "gone.jsonl"): 1}, seen="other")
    text = "\n".join(bad)
    assert f"{out} there is not the driver's folder" in text
    assert f"inputs missing: {tmp_path / 'gone.jsonl'}" in text
    assert f"inputs of another size: {f} (3 bytes, the driver's 99)" in text
    _, bad = _probe(tmp_path, tmp_path / "absent" / "out", {})
    assert any("does not exist there" in b for b in bad)


def test_other_build_python_and_libraries_are_named():
    driver = build.environment()
    node = {**driver, "curate": "0.0.9", "python": "3.12",
            "libs": {**driver["libs"], "numpy": "1.26.4", "datatrove": None}}
    bad = cluster.problems({"env": node, "out": "ok", "inputs": []}, driver, cluster.Path("/o"))
    assert bad[0].startswith(f"curate 0.0.9 (code {driver['code']}) while the driver runs {driver['curate']}")
    assert bad[1] == f"Python 3.12, the driver {driver['python']}"
    assert f"datatrove absent (driver {driver['libs']['datatrove']})" in bad[2] and f"numpy 1.26.4 (driver {driver['libs']['numpy']})" in bad[2]
    missing = cluster.problems({"env": None, "error": "ModuleNotFoundError: No module named 'curation'",
                                "out": "ok", "inputs": []}, driver, cluster.Path("/o"))
    assert missing == [f"curate cannot be imported (ModuleNotFoundError: No module named 'curation'); install "
                       f"curate=={driver['curate']} (and its extras) on every node"]


def _node_with(libs: dict) -> dict:
    driver = build.environment()
    return {"env": {**driver, "libs": {**driver["libs"], **libs}}, "out": "ok", "inputs": []}


def test_only_the_libraries_of_the_recipes_media_are_compared():
    driver = build.environment()
    driver["libs"].update({"torch": None, "lhotse": None, "pillow": None})      # a text-only driver
    node = _node_with({"torch": "2.13.0", "lhotse": "1.33.0", "pillow": "11.0"})  # workers with the extras
    text = build.deciding_libraries(set())
    assert cluster.problems(node, driver, cluster.Path("/o"), text) == []
    assert not {"torch", "lhotse", "pillow", "imagehash", "soxr", "soundfile"} & set(text)
    [bad] = cluster.problems(node, driver, cluster.Path("/o"), build.deciding_libraries({"image"}))
    assert bad == "other library versions: pillow 11.0 (driver absent), torch 2.13.0 (driver absent)"
    [bad] = cluster.problems(node, driver, cluster.Path("/o"), build.deciding_libraries({"audio"}))
    assert bad == "other library versions: lhotse 1.33.0 (driver absent), torch 2.13.0 (driver absent)"
    # text libraries always count, whatever the media
    [bad] = cluster.problems(_node_with({"tokenizers": "0.1"}), build.environment(), cluster.Path("/o"), text)
    assert bad.startswith("other library versions: tokenizers 0.1 (driver ")


@pytest.mark.parametrize("recipe,media", [("text", set()), ("acquisition", set()), ("images", {"image"}),
                                          ("audio", {"audio"}), ("demo", {"image", "audio"})])
def test_media_of_the_shipped_recipes(recipe, media):
    from curation.recipe import load_recipe
    from tests.conftest import REPO
    assert build.media_kinds(load_recipe(REPO / "recipes" / f"{recipe}.yaml", resolve_inputs=False).recipe) == media


def test_code_digest_ignores_the_wheels_data_files(tmp_path):
    """A wheel carries `recipes/` and `tokenizers/` as `curation/data/` (setup.py), with the recipes' helper
    scripts: a driver installed from the wheel and workers running a checkout of the same commit agree."""
    import shutil

    from tests.conftest import REPO
    wheel = tmp_path / "site-packages" / "curation"
    shutil.copytree(REPO / "curation", wheel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("recipes", "tokenizers"):
        shutil.copytree(REPO / name, wheel / "data" / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert list((wheel / "data").rglob("*.py"))                    # the helper scripts are there
    assert build.code_digest(wheel) == build.code_digest()
    (wheel / "runtime" / "cluster.py").write_text("# another build\n")   # the package's own code still counts
    assert build.code_digest(wheel) != build.code_digest()


@pytest.mark.slow
def test_code_digest_of_a_built_wheel_equals_the_checkouts(wheel, tmp_path):
    """The real wheel (setup.py's build step, built once from a copy of the tree: `wheel` in
    tests/sessions.py, which test_wheel.py installs too)."""
    import zipfile

    zipfile.ZipFile(wheel).extractall(tmp_path / "installed")
    installed = tmp_path / "installed" / "curation"
    assert list((installed / "data" / "recipes").rglob("*.py"))
    assert build.code_digest(installed) == build.code_digest()
