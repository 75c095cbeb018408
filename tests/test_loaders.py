"""User corpus loaders: every format round-trips, every bad input is a one-line UserError."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from privleak.core.errors import UserError
from privleak.data.loaders import load_corpus

TEXTS = ["First note, with a comma.", 'Second "quoted" note', "Third\nspans two lines", "ünïcode ✓"]


def _assert_records(records, texts=TEXTS) -> None:
    assert [r.text for r in records] == [t.strip() for t in texts]
    for r in records:
        assert r.pii is None
        assert r.meta["kind"] == "user"
        assert isinstance(r.meta["source_line"], int) and r.meta["source_line"] >= 1


def _user_error(path, **kw) -> str:
    with pytest.raises(UserError) as info:
        load_corpus(path, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# ---- round trips -------------------------------------------------------------


def test_jsonl_roundtrip_and_source_lines(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    lines = [json.dumps({"text": t, "id": i}, ensure_ascii=False) for i, t in enumerate(TEXTS)]
    p.write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n", encoding="utf-8")
    recs = load_corpus(p)
    _assert_records(recs)
    assert [r.meta["source_line"] for r in recs] == [1, 2, 4, 5]


def test_jsonl_custom_field_and_u2028(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    texts = ["a\u2028b", "  padded  "]
    p.write_text("\n".join(json.dumps({"body": t}, ensure_ascii=False) for t in texts), encoding="utf-8")
    assert [r.text for r in load_corpus(p, text_field="body")] == ["a\u2028b", "padded"]


def test_json_array(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps([{"text": t} for t in TEXTS]), encoding="utf-8")
    _assert_records(load_corpus(p))


def test_csv_roundtrip(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    with open(p, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "note"])
        for i, t in enumerate(TEXTS):
            w.writerow([i, t])
    recs = load_corpus(p, text_field="note")
    _assert_records(recs)
    # The multi-line third note starts on line 4 and ends on 5.
    assert [r.meta["source_line"] for r in recs] == [2, 3, 4, 6]


def test_text_roundtrip(tmp_path: Path) -> None:
    p = tmp_path / "c.txt"
    p.write_text("  one  \n\n\ttwo\r\nthree\n   \n", encoding="utf-8")
    recs = load_corpus(p)
    assert [r.text for r in recs] == ["one", "two", "three"]
    assert [r.meta["source_line"] for r in recs] == [1, 3, 4]


def test_unknown_extension_is_text_and_bom_is_stripped(tmp_path: Path) -> None:
    p = tmp_path / "notes.dat"
    p.write_bytes(b"\xef\xbb\xbfalpha\nbeta\n")
    assert [r.text for r in load_corpus(p)] == ["alpha", "beta"]


def test_explicit_format_overrides_extension(tmp_path: Path) -> None:
    p = tmp_path / "c.txt"
    p.write_text('{"text": "x"}\n', encoding="utf-8")
    assert [r.text for r in load_corpus(p, fmt="jsonl")] == ["x"]
    assert [r.text for r in load_corpus(p)] == ['{"text": "x"}']
    assert "unknown corpus format" in _user_error(p, fmt="parquet")


def test_hf_dataset_roundtrip(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    d = tmp_path / "ds"
    datasets.Dataset.from_dict({"text": TEXTS, "label": list(range(len(TEXTS)))}).save_to_disk(str(d))
    recs = load_corpus(d)
    _assert_records(recs)
    assert [r.meta["source_line"] for r in recs] == [1, 2, 3, 4]
    assert "no column 'body'" in _user_error(d, text_field="body")
    assert "label" in _user_error(d, text_field="body")
    assert "not a string" in _user_error(d, text_field="label")


def test_hf_dataset_dict_uses_train(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    d = tmp_path / "dd"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"text": ["a", "b"]}),
        "test": datasets.Dataset.from_dict({"text": ["c"]}),
    }).save_to_disk(str(d))
    assert [r.text for r in load_corpus(d)] == ["a", "b"]


# ---- errors ------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    msg = _user_error(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in msg and "no such file" in msg


def test_plain_directory(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    msg = _user_error(tmp_path)
    assert str(tmp_path) in msg and "save_to_disk" in msg


def test_damaged_hf_directory(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{}")
    msg = _user_error(tmp_path)
    assert "could not load the saved dataset" in msg


@pytest.mark.parametrize("name", ["e.jsonl", "e.csv", "e.txt"])
def test_empty_file(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    p.write_text("  \n\n")
    msg = _user_error(p)
    assert name in msg and "empty" in msg


def test_all_records_blank(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "  "}\n{"text": ""}\n')
    msg = _user_error(p)
    assert "no non-empty records" in msg and "'text'" in msg


def test_non_utf8_names_line(tmp_path: Path) -> None:
    p = tmp_path / "latin.txt"
    p.write_bytes(b"fine\nalso fine\ncaf\xe9\n")
    msg = _user_error(p)
    assert "latin.txt" in msg and "line 3" in msg and "UTF-8" in msg


def test_gzip_file(tmp_path: Path) -> None:
    import gzip

    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"text": "x"}\n'))
    assert "gzip" in _user_error(p)


def test_tsv(tmp_path: Path) -> None:
    p = tmp_path / "c.tsv"
    p.write_text("id\ttext\n1\thello, world\n", encoding="utf-8")
    assert [r.text for r in load_corpus(p)] == ["hello, world"]


def test_malformed_json_line(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n{"text": "broken"\n')
    msg = _user_error(p)
    assert "c.jsonl" in msg and "line 2" in msg and "malformed JSON" in msg


def test_json_line_not_object(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n["a", "b"]\n')
    msg = _user_error(p)
    assert "line 2" in msg and "array" in msg and "not an object" in msg


def test_missing_text_field(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n{"body": "x", "id": 3}\n')
    msg = _user_error(p)
    assert "line 2" in msg and "'text'" in msg and "body, id" in msg and "--text-field" in msg


def test_text_field_not_string(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n{"text": 42}\n')
    msg = _user_error(p)
    assert "line 2" in msg and "number" in msg and "not a string" in msg


def test_csv_missing_column(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text("id,body\n1,hello\n")
    msg = _user_error(p)
    assert "c.csv" in msg and "'text'" in msg and "id, body" in msg and "--text-field" in msg


def test_csv_short_row(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text("id,text\n1,hello\n2\n")
    msg = _user_error(p)
    assert "line 3" in msg


def test_error_message_with_newline_in_path_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "odd\nname.jsonl"
    p.write_text('{"x": 1}\n')
    _user_error(p)
