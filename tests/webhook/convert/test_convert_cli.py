"""`gpuclaim convert`: output order and shapes, stdin, exit codes, messages naming object and field."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from convert_support import FIXTURES
from official_schemas import assert_valid

from gpuclaim.cli import main

SEEDS = FIXTURES / "manifests/seed-legacy-workloads.yaml"
CLASSES = FIXTURES / "deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["convert", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_yaml_output_lists_converted_objects_then_their_templates_and_claims(capsys: pytest.CaptureFixture[str]
                                                                           ) -> None:
    code, out, err = run(capsys, "-f", str(SEEDS), "--classes", str(CLASSES))
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    kinds = [d["kind"] for d in docs]
    assert kinds[:6] == ["Deployment", "Pod", "Pod", "CronJob", "Pod", "Pod"]
    assert set(kinds[6:]) == {"ResourceClaimTemplate", "ResourceClaim"}
    assert kinds.count("ResourceClaim") == 1  # the sharing group's claim, once
    for doc in docs:
        assert_valid(doc)
    assert "KEP-5004" in err  # gpu.nvidia.com declares nvidia.com/gpu in the fixture classes


def test_json_output_is_one_array_in_the_same_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SEEDS), "-o", "json")
    assert code == 0
    docs = orjson.loads(out)
    assert isinstance(docs, list) and docs[0]["kind"] == "Deployment" and docs[-1]["kind"] in (
        "ResourceClaimTemplate", "ResourceClaim")


def test_stdin_and_kind_list_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    items = [d for d in yaml.safe_load_all(SEEDS.read_text()) if d]
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items[1:2]})
    monkeypatch.setattr("sys.stdin", io.StringIO(listed))
    code, out, _ = run(capsys, "-f", "-", "-o", "json")
    assert code == 0
    assert [d["kind"] for d in orjson.loads(out)] == ["Pod", "ResourceClaimTemplate"]


def test_objects_without_mapped_resources_pass_through_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "manifests/intel-gaudi-deployment-extended-resources.yaml"
    code, out, _ = run(capsys, "-f", str(path), "-o", "json")
    assert code == 0
    assert orjson.loads(out) == [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_a_refused_object_exits_1_and_says_which_and_why(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    docs: list[Any] = [d for d in yaml.safe_load_all(SEEDS.read_text()) if d]
    docs[1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, out, err = run(capsys, "-f", str(path))
    assert code == 1
    assert 'refused: Pod ml/trainer: spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1.5"' in err
    assert len(list(yaml.safe_load_all(out))) > 1  # the rest is still converted


def test_unknown_classes_are_refused_only_with_classes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("conversion:\n  mappings:\n  - {resource: nvidia.com/gpu, deviceClassName: gpu.example.org}\n")
    pod = FIXTURES / "manifests/extended-resources_gpu-full.yaml"
    assert run(capsys, "-f", str(pod), "--config", str(config))[0] == 0
    code, _, err = run(capsys, "-f", str(pod), "--config", str(config), "--classes", str(CLASSES))
    assert code == 1 and "gpu.example.org does not exist" in err


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("a: [", "not valid YAML"),
    ("- just\n- a list\n", "is not an object"),
], ids=["missing", "bad-yaml", "not-an-object"])
def test_unreadable_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                content: str | None, message: str) -> None:
    path = tmp_path / "in.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = run(capsys, "-f", str(path))
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_a_bad_config_exits_2_naming_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("conversion:\n  topology: {mode: sometimes}\n")
    code, _, err = run(capsys, "-f", str(SEEDS), "--config", str(config))
    assert code == 2 and "conversion.topology.mode" in err
