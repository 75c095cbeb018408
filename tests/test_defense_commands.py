"""``privleak scrub IN OUT`` / ``privleak dedup IN OUT`` bodies: formats, errors, atomic output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from privleak.core.errors import UserError
from privleak.defenses import commands
from privleak.defenses.commands import dedup_file, scrub_file
from privleak.defenses.pii import DEFAULT_SCRUB_LABELS, get_analyzer
from privleak.defenses.scrub import Scrubber

NOTES = [
    "Patient John Smith, DOB 1970-03-04, MRN-123456; phone (555) 234-5678.",
    "General advice: drink water and sleep well.",
    "Seen today: Mary Jones, MRN-654321, e-mail mary.jones@example.org.",
    "General advice: drink water and sleep well.",
    "Call John Smith back on 555-234-5678 about SSN 123-45-6789.",
]


@pytest.fixture(scope="module")
def analyzer():
    return get_analyzer(DEFAULT_SCRUB_LABELS)


def _listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_jsonl_round_trip_keeps_fields_and_repositions_pii(tmp_path, analyzer):
    src = tmp_path / "in.jsonl"
    rows = [{"id": i, "text": t, "tags": ["a", i], "pii": [[0, 7, "CONDITION"]] if i == 1 else None}
            for i, t in enumerate(NOTES)]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    rep = scrub_file(src, tmp_path / "out.jsonl", analyzer=analyzer, mode="mask")
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == len(rows) and rep.n_records == 5 and rep.n_changed == 3
    for before, after in zip(rows, out):
        assert {k: v for k, v in after.items() if k not in ("text", "pii")} == \
            {k: v for k, v in before.items() if k not in ("text", "pii")}
    assert out[0]["text"] == "Patient <NAME>, DOB <DOB>, <MRN>; phone <PHONE>."
    assert out[1]["text"] == NOTES[1] and out[1]["pii"] == [[0, 7, "CONDITION"]]
    assert "John Smith" not in (tmp_path / "out.jsonl").read_text()
    assert rep.counts["NAME"] == 3 and rep.format == "jsonl" and "records/s" in rep.summary()
    assert _listing(tmp_path) == ["in.jsonl", "out.jsonl"]


def test_csv_round_trip_keeps_columns(tmp_path, analyzer):
    src = tmp_path / "in.csv"
    with open(src, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "note", "site"])
        for i, t in enumerate(NOTES):
            w.writerow([i, t, f"site, {i}"])
    scrub_file(src, tmp_path / "out.csv", analyzer=analyzer, text_field="note", mode="tag")
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as fh:
        got = list(csv.reader(fh))
    assert got[0] == ["id", "note", "site"] and len(got) == 6
    assert [r[0] for r in got[1:]] == [str(i) for i in range(5)]
    assert [r[2] for r in got[1:]] == [f"site, {i}" for i in range(5)]
    assert got[1][1].startswith("Patient <NAME_1>, DOB <DOB_1>, <MRN_1>")
    assert "<NAME_1>" in got[5][1] and "<PHONE_1>" in got[5][1]  # same person, same tags

    rep = dedup_file(src, tmp_path / "dedup.csv", text_field="note")
    with open(tmp_path / "dedup.csv", newline="", encoding="utf-8") as fh:
        kept = list(csv.reader(fh))
    assert rep.n_removed == 1 and rep.removed_lines == [5] and len(kept) == 5
    assert [r[0] for r in kept[1:]] == ["0", "1", "2", "4"]


def test_text_round_trip_one_record_per_line(tmp_path, analyzer):
    src = tmp_path / "notes.txt"
    src.write_text("\n".join(NOTES[:3]) + "\n\n" + "\n".join(NOTES[3:]) + "\n", encoding="utf-8")
    rep = scrub_file(src, tmp_path / "out.txt", analyzer=analyzer, mode="pseudonym", seed=1)
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 7 and lines[3] == "" and lines[-1] == ""  # line for line, blank kept
    assert rep.n_rows == 6 and rep.n_records == 5
    assert lines[1] == NOTES[1] and "John Smith" not in lines[0] and "<" not in lines[0]
    first = lines[0].split(",")[0].removeprefix("Patient ")
    assert first in lines[5]  # the same pseudonym for the same person
    rep = dedup_file(src, tmp_path / "d.txt", method="exact")
    assert (tmp_path / "d.txt").read_text().split("\n") == NOTES[:3] + [""] + [NOTES[4], ""]
    assert rep.removed_lines == [5] and rep.stages[0]["method"] == "exact"


def test_pseudonyms_come_from_a_random_key_unless_a_seed_is_given(tmp_path, analyzer):
    """Whoever knows the key can test a guess against a fake, and a scrubbed file leaves the user's hands:
    without a seed each run draws its own key (kept nowhere), still one fake per person within the file; a
    given seed repeats the fakes, and the report says which it was."""
    src = tmp_path / "notes.txt"
    src.write_text("\n".join(NOTES) + "\n", encoding="utf-8")

    def run(name, seed):
        rep = scrub_file(src, tmp_path / name, analyzer=analyzer, mode="pseudonym", seed=seed)
        return rep, (tmp_path / name).read_text(encoding="utf-8").split("\n")

    (r1, a), (r2, b) = run("a.txt", None), run("b.txt", None)
    assert a != b and r1.key == r2.key == "random" and "random key, not kept" in r1.summary()
    assert a[0].split(",")[0].removeprefix("Patient ") in a[4]  # the same person, the same fake
    (r3, c), (_, d) = run("c.txt", 5), run("d.txt", 5)
    assert c == d and r3.key == "seed" and "random key" not in r3.summary()
    assert scrub_file(src, tmp_path / "m.txt", analyzer=analyzer, mode="mask").key == ""


def test_dedup_jsonl_near_keeps_other_fields(tmp_path):
    src = tmp_path / "in.jsonl"
    texts = ["The quick brown fox jumps over the lazy dog by the river.",
             "The quick brown fox jumps over the lazy dog by the river!",
             "Something else."]
    src.write_text("".join(json.dumps({"text": t, "k": i}) + "\n" for i, t in enumerate(texts)))
    rep = dedup_file(src, tmp_path / "out.jsonl", method="near", threshold=0.8)
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [{"text": texts[0], "k": 0}, {"text": texts[2], "k": 2}]
    assert rep.n_removed == 1 and "removed" in rep.summary()


@pytest.mark.parametrize("name,content,field,match", [
    ("bin.txt", b"\x00\x01\x02binary\x00data", "text", "binary"),
    ("latin.txt", "caf\xe9\n".encode("latin-1"), "text", "not valid UTF-8"),
    ("empty.jsonl", b"", "text", "empty"),
    ("blank.txt", b"  \n\n", "text", "empty"),
    ("cols.csv", b"id,body\n1,hello\n", "text", "no column 'text'"),
    ("field.jsonl", b'{"body": "hello"}\n', "text", "no field 'text'"),
    ("bad.jsonl", b'{"text": "a"}\n{"text": \n', "text", "line 2: malformed JSON"),
    ("gz.jsonl", b"\x1f\x8b\x08\x00rest", "text", "gzip"),
    ("nothing.csv", b"id,text\n1,\n", "text", "no non-empty records"),
])
@pytest.mark.parametrize("command", ["scrub", "dedup"])
def test_malformed_input_is_one_line_user_error(tmp_path, analyzer, name, content, field, match, command):
    src = tmp_path / name
    src.write_bytes(content)
    out = tmp_path / "out.file"
    with pytest.raises(UserError, match=match) as err:
        if command == "scrub":
            scrub_file(src, out, analyzer=analyzer, text_field=field)
        else:
            dedup_file(src, out, text_field=field)
    assert "\n" not in str(err.value) and str(src) in str(err.value)
    assert not out.exists() and _listing(tmp_path) == [name]


def test_missing_and_directory_inputs(tmp_path, analyzer):
    with pytest.raises(UserError, match="no such file"):
        scrub_file(tmp_path / "nope.jsonl", tmp_path / "o.jsonl", analyzer=analyzer)
    with pytest.raises(UserError, match="is a directory"):
        dedup_file(tmp_path, tmp_path / "o.jsonl")
    (tmp_path / "in.txt").write_text("hello\n")
    (tmp_path / "outdir").mkdir()
    with pytest.raises(UserError, match="is a directory"):
        dedup_file(tmp_path / "in.txt", tmp_path / "outdir")
    with pytest.raises(UserError, match="unknown scrub mode"):
        scrub_file(tmp_path / "in.txt", tmp_path / "o.txt", analyzer=analyzer, mode="hash")


def test_no_partial_output_when_scrubbing_fails_midway(tmp_path, analyzer, monkeypatch):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in NOTES * 20))
    out = tmp_path / "out.jsonl"
    real_apply = Scrubber.apply
    calls = {"n": 0}

    def flaky(self, text, dets):
        calls["n"] += 1
        if calls["n"] == 50:
            raise RuntimeError("scrubber crashed mid-way")
        return real_apply(self, text, dets)

    monkeypatch.setattr(Scrubber, "apply", flaky)
    with pytest.raises(RuntimeError, match="mid-way"):
        scrub_file(src, out, analyzer=analyzer)
    assert calls["n"] == 50
    assert not out.exists() and _listing(tmp_path) == ["in.jsonl"]  # no output, no temp file

    out.write_text("previous output\n")
    calls["n"] = 0
    with pytest.raises(RuntimeError, match="mid-way"):
        scrub_file(src, out, analyzer=analyzer)
    assert out.read_text() == "previous output\n" and _listing(tmp_path) == ["in.jsonl", "out.jsonl"]

    monkeypatch.setattr(Scrubber, "apply", real_apply)
    scrub_file(src, out, analyzer=analyzer)  # succeeds: replaces the old output atomically
    assert len(out.read_text().splitlines()) == 100 and _listing(tmp_path) == ["in.jsonl", "out.jsonl"]


def test_in_place_refused_and_progress_hook(tmp_path, analyzer, monkeypatch):
    seen = []

    from contextlib import contextmanager

    @contextmanager
    def fake_bar(description, total):
        seen.append((description, total))
        yield lambda n=1, **f: seen.append(n)

    monkeypatch.setattr(commands, "progress_bar", fake_bar)
    src = tmp_path / "notes.txt"
    src.write_text("\n".join(NOTES) + "\n")
    before = src.read_bytes()
    with pytest.raises(UserError, match="is the input file"):  # OUT = IN is refused: the input is never replaced
        scrub_file(src, src, analyzer=analyzer)
    assert src.read_bytes() == before and seen == []
    out = tmp_path / "scrubbed.txt"
    scrub_file(src, out, analyzer=analyzer)
    assert "John Smith" not in out.read_text() and len(out.read_text().splitlines()) == 5
    # In characters analysed (one advance per record here: the notes are short), so a long record moves it too.
    n_chars = sum(len(n) for n in NOTES)
    assert seen[0] == ("scrubbing (characters)", n_chars) and sum(seen[1:]) == n_chars and len(seen) == 6
    dedup_file(src, tmp_path / "d.txt")
    assert ("deduplicating", 5) in seen
