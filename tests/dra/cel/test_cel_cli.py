"""`gpuclaim cel` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuclaim.cli import main

SLICES = str(Path(__file__).parents[2] / "fixtures/resourceslices/aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["cel", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_a_quantity_in_canonical_form(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "device.capacity['gpu.nvidia.com'].memory", "--slices", SLICES, "--device", "gpu-1")
    assert (code, out) == (0, "81559Mi\n")


def test_json_value_and_the_apiserver_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "device.attributes['gpu.nvidia.com'].driverVersion", "--slices", SLICES,
                       "--device", "gpu-2", "-o", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["value"] == "580.105.8"
    assert "apiserver" not in doc  # an attribute is of the unknown type: acceptable as a selector result
    code, out, _ = run(capsys, "1 + 1", "-o", "json")
    assert json.loads(out) == {"value": 2, "apiserver": "must evaluate to bool or the unknown type, not int"}


def test_selector_match_without_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "quantity('1Gi') == quantity('1024Mi')") == (0, "true\n", "")


def test_compile_error_exits_1_with_hint(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quantity('2Gi') > quantity('1Gi')")
    assert code == 1
    assert out.startswith("compilation failed: ERROR: <input>:1:17: found no matching overload for '_>_'")
    assert "hint: " in out


def test_compile_error_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "x", "-o", "json")
    assert code == 1
    assert json.loads(out)["stage"] == "compile"
    assert "undeclared reference to 'x'" in json.loads(out)["error"]


def test_runtime_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    expr = "device.attributes['gpu.nvidia.com'].index == 0"
    code, out, _ = run(capsys, expr, "--slices", SLICES, "--device", "gpu-1")
    assert (code, out) == (1, "runtime error: no such key: index\n")
    code, out, _ = run(capsys, "device.attributes['gpu.nvidia.com'].index == 0", "--slices", SLICES,
                       "--device", "gpu-1", "-o", "json")
    assert json.loads(out) == {"error": "no such key: index", "stage": "runtime"}


def test_stored_only_functions_evaluate_and_report_the_apiserver_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lists.range(3).size() == 3", "-o", "json", "--kubernetes-version", "1.34")
    doc = json.loads(out)
    assert code == 0
    assert doc["value"] is True
    assert "undeclared reference to 'lists'" in doc["apiserver"]
    # 1.35's apiserver compiles new selectors with 1.34's libraries, ext.Lists v3 among them
    code, out, _ = run(capsys, "lists.range(3).size() == 3", "-o", "json", "--kubernetes-version", "1.35")
    assert code == 0 and json.loads(out) == {"value": True}


def test_unknown_device_is_a_usage_error_listing_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "true", "--slices", SLICES, "--device", "gpu-99")
    assert code == 2
    assert "no device named 'gpu-99'" in err
    assert "gpu-1" in err


def test_unreadable_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "true", "--slices", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "cannot read" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    code, _, err = run(capsys, "true", "--slices", str(bad))
    assert code == 2
    assert "not valid YAML" in err
