import pytest

from privleak.arms import arm_names, resolve
from privleak.config import build_config, read_config_file, resolve_delta
from privleak.core.errors import UserError


def test_defaults_and_arm_names():
    cfg = build_config()
    assert arm_names(cfg) == ["baseline", "best", "dp-1", "dp-8", "dp-user-10", "scrub", "dp-8+scrub", "guard"]
    assert cfg.profile == "quick"


def test_explicit_arms_are_canonicalised():
    cfg = resolve(build_config(overrides={"arms": ["baseline", "scrub+dp-4", "scrub+dedup", "dp-8+lora", "guard"]}))
    assert cfg.arms == ("baseline", "dp-4+scrub", "dedup+scrub", "dp-8+lora", "guard")
    assert arm_names(cfg) == list(cfg.arms)


@pytest.mark.parametrize("arms, fragment", [
    (["guard"], "list baseline too"),
    (["dp-x"], "write e.g. dp-8"),
    (["dp-0"], "must be > 0"),
    (["lora"], "combine it with a dp-ε part"),
    (["baseline+scrub"], "stands alone"),
    (["scrub", "scrub"], "listed twice"),
    (["dp-4+dp-8"], "only one dp-ε"),
    (["scrubb"], "unknown part 'scrubb'"),
    ([], "at least one arm"),
])
def test_bad_arms_are_one_line_errors(arms, fragment):
    with pytest.raises(UserError, match=fragment):
        resolve(build_config(overrides={"arms": arms}))


@pytest.mark.parametrize("n", [0, 1])
def test_lira_needs_two_shadows(n):
    with pytest.raises(UserError, match="at least 2 shadow models"):
        build_config(overrides={"shadows": {"enabled": True, "n_shadows": n}})
    build_config(overrides={"shadows": {"enabled": False, "n_shadows": n}})  # off: no shadows needed


def test_precedence_defaults_profile_file_flags(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('profile = "full"\n[dp]\nepochs = 2\n[canaries]\ncandidates = 500\n')
    cfg = build_config(read_config_file(f), {"canaries": {"candidates": 700}})
    assert cfg.profile == "full"
    assert cfg.dp.epsilons == (0.5, 1.0, 2.0, 4.0, 8.0)  # from the profile
    assert cfg.dp.epochs == 2  # file beats profile
    assert cfg.canaries.candidates == 700  # flags beat file


def test_default_delta_is_below_one_over_n():
    delta, warning = resolve_delta(build_config(), 1293)
    assert delta < 1 / 1293 and warning is None


def test_large_delta_warns():
    delta, warning = resolve_delta(build_config(overrides={"dp": {"delta": 0.01}}), 1293)
    assert delta == 0.01
    assert "1/n" in warning


@pytest.mark.parametrize(
    "over, field",
    [
        ({"dp": {"epsilons": [0]}}, "dp.epsilons"),
        ({"dp": {"delta": 1.0}}, "dp.delta"),
        ({"data": {"split": [0.5, 0.5, 0.5]}}, "data.split"),
        ({"model": {"embedded": {"n_embd": 100, "n_head": 3}}}, "model.embedded"),
        ({"canaries": {"repeats": []}}, "canaries.repeats"),
        ({"trian": {}}, "trian"),
    ],
)
def test_invalid_config_names_the_field(over, field):
    with pytest.raises(UserError) as exc:
        build_config(overrides=over)
    assert field in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unparseable_config_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("dp: [unclosed\n")
    with pytest.raises(UserError, match="c.yaml"):
        read_config_file(f)


def test_full_profile_adds_dedup_lora_and_federated_arms():
    assert arm_names(build_config(overrides={"profile": "full"})) == [
        "baseline", "best", "dp-0.5", "dp-1", "dp-2", "dp-4", "dp-8", "dp-user-10", "scrub", "dp-8+scrub", "dedup", "dp-8+lora",
        *[f"dpw-{s:g}" for s in build_config(overrides={"profile": "full"}).dp_weights.sigmas], "fedavg", "fed-dp-8",
        "guard"]


def test_dp_clipping_defaults_to_book_keeping():
    assert build_config().dp.clipping == "bk"
