"""``npu-jax precision``: the table, JSON, plot, formats, the baselines update and bad input."""

from __future__ import annotations

import json

from npu_jax import cli


def test_precision_table(capsys):
    assert cli.main(["precision", "--depths", "2,4"]) == 0
    out = capsys.readouterr().out
    assert "Precision strategies" in out and "Reading:" in out
    for word in ("well_scaled", "growing", "tiny", "scaling_delayed", "vs fp32", "err@4"):
        assert word in out


def test_precision_json_and_plot(capsys, tmp_path):
    path = tmp_path / "err.png"
    assert (
        cli.main(
            [
                "precision",
                "--depths",
                "3",
                "--scenarios",
                "growing",
                "--strategies",
                "fp16,scaling_current",
                "--json",
                "--plot",
                str(path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = json.loads(out[: out.rindex("}") + 1])["rows"]
    assert {r["strategy"] for r in rows} == {"fp16", "scaling_current"}
    assert path.exists()


def test_formats_and_update_baselines(capsys, tmp_path):
    assert cli.main(["precision", "--formats"]) == 0
    assert "fp8_e4m3fn" in capsys.readouterr().out
    assert cli.main(["precision", "--update-baselines", "--baselines-dir", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert "conv3x3_fp16_mixed.json" in written and len(written) == 4
    assert "wrote" in capsys.readouterr().out


def test_bad_input_is_one_line(capsys):
    assert cli.main(["precision", "--depths", "0,2"]) == 2
    assert cli.main(["precision", "--strategies", "fp64"]) == 2
    err = capsys.readouterr().err
    assert "--depths" in err and "--strategies" in err and "fp64" in err
