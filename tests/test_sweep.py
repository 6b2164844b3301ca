"""npu_jax.sweep: a grid on an executor (a process pool, a real Dask LocalCluster), resumable, every
point once, failures recorded in their rows."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import npu_jax
from npu_jax.sweeps import point_key, points

pd = pytest.importorskip("pandas")

GRID = {"x": [0, 1, 2, 3, 4, 5], "scale": [1.0, 0.5], "tag": "a"}


def _figures(point: dict) -> dict:
    """A point function: fails on x == 3; records each call as a file when ``point['log']`` is set."""
    if point.get("log"):
        Path(point["log"], f"{point['x']}-{point['scale']}-{os.getpid()}").touch()
    if point["x"] == 3:
        raise ValueError("x == 3 is refused")
    return {"y": point["x"] ** 2 * point["scale"], "pid": os.getpid(), "n": np.int64(point["x"])}


def _kill_once(point: dict) -> dict:
    """Kills its worker process the first time it runs x == 2 (a marker file says it did)."""
    marker = Path(point["log"], "killed")
    if point["x"] == 2 and not marker.exists():
        marker.touch()
        os._exit(1)
    return {"y": point["x"] ** 2 * point["scale"]}


def _rows(df):
    """Rows without their timing and worker, missing values (NaN, or "" from a CSV) as None."""
    df = df.drop(columns=["seconds", "pid"], errors="ignore").astype(object)
    return [
        {k: None if v is None or v == "" or v != v else v for k, v in r.items()}
        for r in df.to_dict("records")
    ]


def test_points_are_the_grids_product_in_order():
    pts = points(GRID)
    assert len(pts) == 12 and pts[0] == {"x": 0, "scale": 1.0, "tag": "a"} and pts[1]["scale"] == 0.5
    assert point_key({"b": 1, "a": {"z": 1, "y": 2}}) == point_key({"a": {"y": 2, "z": 1}, "b": 1})
    with pytest.raises(ValueError, match=r"grid\['x'\] is empty"):
        points({"x": []})
    with pytest.raises(ValueError, match="repeated points"):
        npu_jax.sweep({"x": [1, 1]}, fn=_figures, executor=cf.ThreadPoolExecutor(1), progress=False)
    with pytest.raises(ValueError, match=r"out must end in \.parquet or \.csv"):
        npu_jax.sweep(GRID, fn=_figures, out="rows.txt", progress=False)


def test_failures_are_rows_and_a_rerun_runs_only_what_is_missing(tmp_path):
    out = tmp_path / "rows.csv"
    log = tmp_path / "log"
    log.mkdir()
    grid = {**GRID, "log": str(log)}
    with cf.ThreadPoolExecutor(2) as ex:
        df = npu_jax.sweep(grid, fn=_figures, out=out, executor=ex, progress=False)
    assert len(df) == 12 and len(list(log.iterdir())) == 12
    bad = df[df["x"] == 3]
    assert (bad["error"] == "ValueError: x == 3 is refused").all() and bad["y"].isna().all()
    good = df[df["x"] != 3]
    assert (good["n"] == good["x"]).all()  # a numpy scalar kept as its number, not its text
    assert (good["error"] == "").all() and (good["y"] == good["x"] ** 2 * good["scale"]).all()
    assert _rows(pd.read_csv(out)) == _rows(df)

    # a crash that kept 5 of the journal's lines (and cut the 6th): 7 points run again, none twice
    journal = Path(str(out) + ".jsonl")
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:5]) + "\n" + lines[5][:10])
    out.unlink()
    for f in log.iterdir():
        f.unlink()
    with cf.ThreadPoolExecutor(2) as ex:
        again = npu_jax.sweep(grid, fn=_figures, out=out, executor=ex, progress=False)
    assert len(list(log.iterdir())) == 7
    assert _rows(again) == _rows(df)
    # retry_errors: only the two failed points run again
    for f in log.iterdir():
        f.unlink()
    with cf.ThreadPoolExecutor(2) as ex:
        npu_jax.sweep(grid, fn=_figures, out=out, executor=ex, progress=False, retry_errors=True)
    assert sorted(f.name.rsplit("-", 1)[0] for f in log.iterdir()) == ["3-0.5", "3-1.0"]


def test_process_pool_and_dask_give_identical_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    pool = npu_jax.sweep(GRID, fn=_figures, workers=2, progress=False, out=tmp_path / "pool.parquet")
    assert pool["pid"].dropna().nunique() >= 1 and os.getpid() not in set(pool["pid"].dropna())
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Dask's workers need not import tests/
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        dask = npu_jax.sweep(GRID, fn=_figures, executor=client.get_executor(), progress=False)
    assert _rows(dask) == _rows(pool)
    assert _rows(pd.read_parquet(tmp_path / "pool.parquet")) == _rows(pool)


def test_a_worker_killed_mid_point_has_its_point_run_again(tmp_path):
    """On Dask (its nanny restarts the worker, its scheduler reschedules the point) and on the local
    pool (rebuilt once it breaks): every point once in the output, none failed."""
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    grid = {"x": [0, 1, 2, 3, 4], "scale": [1.0], "log": str(tmp_path)}
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        df = npu_jax.sweep(
            grid, fn=_kill_once, executor=client.get_executor(), progress=False, out=tmp_path / "d.csv"
        )
    assert (tmp_path / "killed").exists()
    assert sorted(df["x"]) == [0, 1, 2, 3, 4] and (df["error"] == "").all()
    assert [
        json.loads(s)["point"]["x"] for s in Path(tmp_path / "d.csv.jsonl").read_text().splitlines()
    ].count(2) == 1

    (tmp_path / "killed").unlink()
    df = npu_jax.sweep(grid, fn=_kill_once, workers=2, progress=False)
    assert (tmp_path / "killed").exists()
    assert sorted(df["x"]) == [0, 1, 2, 3, 4] and (df["error"] == "").all()
    assert list(df["y"]) == [0.0, 1.0, 4.0, 9.0, 16.0]


_SLOW_POINT = """
import os, pathlib, time

def point(p):
    pathlib.Path(p["log"], str(os.getpid())).touch()
    if p["x"]:
        time.sleep(600)
    return {"y": p["x"]}
"""


def test_an_interrupted_sweep_stops_its_workers_at_once(tmp_path):
    """Ctrl-C (SIGINT) in a sweep on the local pool: the call returns at once (not after the points
    its workers were running, nor the ones queued to them), no worker outlives it, and what finished
    is in the journal: a rerun would go on from there."""
    import signal
    import subprocess
    import time

    (tmp_path / "slowpoint.py").write_text(_SLOW_POINT)
    script = (
        "import npu_jax, slowpoint\n"
        f"npu_jax.sweep({{'x': [0, 1, 2, 3, 4, 5], 'log': {str(tmp_path)!r}}}, fn=slowpoint.point,"
        f" workers=2, progress=False, out={str(tmp_path / 'rows.csv')!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    journal = tmp_path / "rows.csv.jsonl"
    deadline = time.monotonic() + 120
    while not (journal.exists() and journal.read_text()) or len(list(tmp_path.glob("[0-9]*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.2)
    time.sleep(0.5)  # both workers deep in a 600-s point
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - start < 30 and "KeyboardInterrupt" in err
    workers = [int(f.name) for f in tmp_path.glob("[0-9]*")]
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    (line,) = journal.read_text().splitlines()
    assert json.loads(line)["point"]["x"] == 0


def test_the_codesign_grid_spec_is_the_216_points_the_docs_name():
    """benchmarks/codesign_grid.toml (the README's command) parses to 216 distinct points whose hw
    specs all resolve, as the CLI reads it."""
    from npu_jax.cli.sweep import _grid
    from npu_jax.sweeps.network import KEYS, _hw

    grid = _grid(Path(__file__).parents[1] / "benchmarks" / "codesign_grid.toml")
    pts = points(grid)
    assert len(pts) == 216 == len({point_key(p) for p in pts}) and set(grid) == {
        "hw",
        "network",
        "batch",
        "policy",
    } <= set(KEYS)
    assert {(_hw(h).name, _hw(h).l2_bytes >> 20) for h in grid["hw"]} == {
        (f"ascend{c}", m) for c in ("910b", "910", "310p") for m in (16, 32, 96, 192)
    }


def test_network_point_estimates_a_zoo_network():
    pytest.importorskip("onnx")
    with cf.ThreadPoolExecutor(1) as ex:
        df = npu_jax.sweep(
            {
                "hw": ["tiny", {"preset": "tiny", "l2_bytes": 0}],
                "network": "small_cnn",
                "batch": [1],
                "policy": ["fp16", "int8"],
            },
            executor=ex,
            progress=False,
        )
    assert len(df) == 4 and (df["error"] == "").all(), df["error"].tolist()
    assert (df["cycles"] > 0).all() and (df["images_per_second"] > 0).all()
    assert df["hw"].tolist()[2] == json.dumps({"l2_bytes": 0, "preset": "tiny"}, sort_keys=True)
    bad = npu_jax.sweep(
        {"hw": "tiny", "network": "small_cnn", "colour": "red"},
        executor=cf.ThreadPoolExecutor(1),
        progress=False,
    )
    assert "unknown ['colour']" in bad["error"][0]
    # model.estimate's own settings are keys too: the epilogues unfused launch more kernels
    fused = npu_jax.sweep(
        {"hw": "tiny", "network": "small_cnn", "fused": [True, False], "strategy": "img2col"},
        executor=cf.ThreadPoolExecutor(1),
        progress=False,
    )
    assert (fused["error"] == "").all() and fused["launches"][1] > fused["launches"][0]
    assert fused["cycles"][0] == df["cycles"][0]  # fused img2col is the default
    # and the network's schedule: stacks kept in L2 (small_cnn fits tiny's L2: fewer stacks than layers)
    sched = npu_jax.sweep(
        {"hw": "tiny", "network": "small_cnn", "schedule": ["layer", "l2"]},
        executor=cf.ThreadPoolExecutor(1),
        progress=False,
    )
    assert (sched["error"] == "").all(), sched["error"].tolist()
    assert sched["cycles"][0] == df["cycles"][0] and sched["stacks"][1] < sched["stacks"][0]


def test_cli_sweep_runs_a_spec_and_resumes(tmp_path):
    pytest.importorskip("onnx")
    from npu_jax.cli import main

    spec = tmp_path / "grid.toml"
    spec.write_text('[grid]\nhw = ["tiny"]\nnetwork = ["small_cnn"]\nbatch = [1, 2]\npolicy = ["fp16"]\n')
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    first = pd.read_csv(out)
    assert first["batch"].tolist() == [1, 2] and (first["cycles"] > 0).all()
    journal = (tmp_path / "rows.csv.jsonl").read_text()
    assert main(["sweep", str(spec), "--out", str(out), "--no-progress"]) == 0  # all done: nothing runs
    assert (tmp_path / "rows.csv.jsonl").read_text() == journal
    spec.write_text("[grid]\n")
    with pytest.raises(SystemExit, match=r"needs a \[grid\] table"):
        main(["sweep", str(spec), "--out", str(out)])


def test_pareto_front_and_pictures(tmp_path):
    df = pd.DataFrame(
        {
            "l2": [8, 8, 16, 16, 32, 32],
            "batch": [1, 8, 1, 8, 1, 8],
            "ips": [100.0, 90.0, 150.0, 140.0, 150.0, 200.0],
            "error": ["", "", "", "", "", "boom"],
        }
    )
    front = npu_jax.sweep.pareto(df, "l2", "ips")
    assert front[["l2", "ips"]].values.tolist() == [[8, 100.0], [16, 150.0]]  # 32 ties 16 at 150; 200 failed
    ax = npu_jax.sweep.plot(df, "l2", "ips", hue="batch", path=tmp_path / "front.png")
    assert (tmp_path / "front.png").stat().st_size > 1000 and ax.get_xlabel() == "l2"
    ax = npu_jax.sweep.plot(df, "l2", "batch", value="ips", path=tmp_path / "heat.png")
    assert ax.images[0].get_array().shape == (2, 3)
    with pytest.raises(KeyError, match="no column 'img_s'"):
        npu_jax.sweep.pareto(df, "l2", "img_s")


def test_ray_executor_runs_a_grid_with_closures():
    """Where Ray is installed (not in CI's dev extra; 2.60.0 run here): each point a Ray task."""
    ray = pytest.importorskip("ray")
    from npu_jax.sweeps import RayExecutor

    offset = 10  # a closure: Ray pickles it by value

    def figures(point):
        if point["x"] == 3:
            raise ValueError("x == 3 is refused")
        return {"y": point["x"] + offset}

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        df = npu_jax.sweep({"x": [0, 1, 2, 3]}, fn=figures, executor=RayExecutor(), progress=False)
    finally:
        ray.shutdown()
    assert df["y"].tolist()[:3] == [10, 11, 12] and df["error"].tolist()[3] == "ValueError: x == 3 is refused"
