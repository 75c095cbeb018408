"""One pool of unprompted samples per model (issue 35): a seeded stream per spec, shared by the attacks."""

from __future__ import annotations

from privleak.attacks.samples import BATCH, SamplePool, SampleSpec, requests, split_evenly
from privleak.attacks.settings import AttackSettings, PiiSizes
from privleak.defenses.guard.generate import GuardedHandle

SPEC = SampleSpec("", 8, 40)


def test_a_stream_is_the_same_whoever_draws_it_and_however_far(tiny_handle, tmp_path):
    small = SamplePool(seed=3).draw(tiny_handle, SPEC, 5)
    big = SamplePool(seed=3)
    more = big.draw(tiny_handle, SPEC, BATCH + 7)
    assert len(small) == 5 and len(more) == BATCH + 7 and more[:5] == small
    assert SamplePool(seed=4).draw(tiny_handle, SPEC, 5) != small  # the seed matters
    big.save(tmp_path / "samples.json")
    stored = SamplePool.load(tmp_path / "samples.json", 3)
    assert stored.draw(tiny_handle, SPEC, BATCH + 7) == more
    assert SamplePool.load(tmp_path / "samples.json", 4).stored == {}  # another seed's pool is not read


def test_a_guarded_handle_reads_its_model_s_draws_through_its_filter(tiny_handle):
    pool = SamplePool(seed=1)
    raw = pool.draw(tiny_handle, SPEC, 6)
    guarded = GuardedHandle(model=tiny_handle.model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length,
                            text_format=tiny_handle.text_format,
                            output_filter=lambda texts, prompts: [t.upper() for t in texts])
    assert pool.draw(guarded, SPEC, 6) == [t.upper() for t in raw]


def test_requests_union_of_sampling_and_pii_extraction():
    s = AttackSettings(extraction_samples=400).model_copy(update={"pii_sizes": PiiSizes()})
    from privleak.attacks.registry import ATTACKS

    want = requests(s, [ATTACKS["sampling_extraction"], ATTACKS["pii_extraction"]])
    # Both draw top-k 40 continuations of 64 tokens from the empty prompt: one stream, the larger count.
    assert want == {SampleSpec("", 64, 40): 200, SampleSpec("Patient", 64, 40): 200}
    assert requests(s, [ATTACKS["prefix_extraction"]]) == {}
    assert split_evenly(5, ["a", "b"]) == [("a", 3), ("b", 2)]


def test_a_continuation_as_long_as_the_context_still_samples(tiny_model_dir):
    """The smollm2 profile's 64-token context and sampling extraction's 64 new tokens: generation used to stop
    with "leaves no room for a prompt" (an internal error in samples/base); it now keeps the prompt and
    generates what fits."""
    from privleak.models.generation import GenerationSettings, generate
    from privleak.models.handle import load_handle

    handle = load_handle(tiny_model_dir, 16)
    out = generate(handle, ["", "Patient"], GenerationSettings(max_new_tokens=16, greedy=False, top_k=40, seed=1,
                                                                 batch_size=4))
    assert [len(o) for o in out] == [1, 1]
    for prompt, (text,) in zip(["", "Patient"], out):
        ids = handle.lead_ids() + handle.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert 0 < len(handle.tokenizer(text, add_special_tokens=False)["input_ids"]) <= 16 - len(ids) + 2
