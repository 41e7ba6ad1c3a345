"""tools/codegen's merge of 3.9 and 4.x specs refuses a disagreement, loudly.

Small spec folders written here (a 3.9 and a 4.x definition of one message) go through
the generator's loader and merge: a version both define with a different wire form
fails with a MergeError naming the message, the version and the field; a rename with
the same wire form is accepted under 4.x's name; a version 3.9 marked
latestVersionUnstable may change; the old versions below 4.x's range are kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for tools/

from tools.codegen.merge import MergeError, merge_all  # noqa: E402
from tools.codegen.spec import load_dir  # noqa: E402


def _spec(valid: str, fields: list[dict], **extra: object) -> dict:
    return {"apiKey": 12, "type": "request", "name": "HeartbeatRequest", "validVersions": valid,
            "flexibleVersions": "4+", "fields": fields, **extra}


def _merge(tmp_path: Path, old: dict, new: dict) -> list:
    for folder, spec in (("old", old), ("new", new)):
        (tmp_path / folder).mkdir()
        text = "// a comment, as Kafka's files have\n" + json.dumps(spec, indent=1)
        (tmp_path / folder / "HeartbeatRequest.json").write_text(text)
    return merge_all(load_dir(tmp_path / "old"), load_dir(tmp_path / "new"))


GROUP = {"name": "GroupId", "type": "string", "versions": "0+"}
GEN = {"name": "GenerationId", "type": "int32", "versions": "0+"}


def test_a_version_both_define_differently_fails_naming_it(tmp_path: Path) -> None:
    changed = {"name": "GenerationId", "type": "int64", "versions": "0+"}
    with pytest.raises(MergeError, match=r"HeartbeatRequest v2: .*GenerationId: int32 .* int64"):
        _merge(tmp_path, _spec("0-4", [GROUP, GEN]), _spec("2-5", [GROUP, changed]))


def test_a_field_only_one_side_has_in_a_shared_version_fails(tmp_path: Path) -> None:
    extra = {"name": "MemberId", "type": "string", "versions": "0+"}
    with pytest.raises(MergeError, match=r"HeartbeatRequest v0: .*MemberId: only in 4.x"):
        _merge(tmp_path, _spec("0-4", [GROUP, GEN]), _spec("0-4", [GROUP, GEN, extra]))


def test_old_versions_kept_and_a_rename_takes_the_new_name(tmp_path: Path) -> None:
    renamed = {"name": "GenerationIdOrMemberEpoch", "type": "int32", "versions": "0+"}
    dropped = {"name": "Legacy", "type": "int8", "versions": "0-1"}
    added = {"name": "MemberId", "type": "string", "versions": "5+"}
    (msg,) = _merge(tmp_path, _spec("0-4", [GROUP, GEN, dropped]), _spec("2-5", [GROUP, renamed, added]))
    assert msg.valid == (0, 5)
    assert [(f.name, f.versions) for f in msg.fields] == [
        ("GroupId", (0, 0x7FFF)), ("GenerationIdOrMemberEpoch", (0, 0x7FFF)), ("Legacy", (0, 1)),
        ("MemberId", (5, 0x7FFF))]
    assert msg.sources == {0: "3.9", 1: "3.9", 2: "4.x", 3: "4.x", 4: "4.x", 5: "4.x"}


def test_an_unstable_3_9_version_may_change(tmp_path: Path) -> None:
    changed = {"name": "GenerationId", "type": "int64", "versions": "4+"}
    old_gen = {"name": "GenerationId", "type": "int32", "versions": "0+"}
    new_gen = {"name": "GenerationId", "type": "int32", "versions": "0-3"}
    (msg,) = _merge(tmp_path, _spec("0-4", [GROUP, old_gen], latestVersionUnstable=True),
                    _spec("0-5", [GROUP, new_gen, {**changed, "name": "Generation64"}]))
    assert msg.unstable_versions == ()
    with pytest.raises(MergeError, match="v4"):
        (tmp_path / "again").mkdir()
        _merge(tmp_path / "again", _spec("0-4", [GROUP, old_gen]),
               _spec("0-5", [GROUP, new_gen, {**changed, "name": "Generation64"}]))
