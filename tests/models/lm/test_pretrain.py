"""The LM level's SFT start: demonstrations, early stopping at the target accuracy, reproducibility and the cache."""

import jax
import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.models import lm
from pgrpo_sim.models.lm import pretrain

SPEC = lm.TaskSpec(modulus=8, operands=3, max_response_len=10, eval_size=64)  # 512 prompts, 47 held out
SHAPE = lm.task_policy_shape(SPEC, width=16, layers=1, heads=2)
TARGET = 0.3


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("pgrpo-sim-cache")


@pytest.fixture(scope="module")
def start(cache_root):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(pretrain.CACHE_ENV, str(cache_root))
        return pretrain.pretrained_start(SPEC, SHAPE, TARGET, seed=3)


@pytest.mark.slow
def test_demonstrations_are_mostly_right_and_vary_in_length():
    noise = 0.3
    prompts, completions = pretrain.demonstrations(SPEC, jax.random.key(0), 3000, noise)
    answers = (np.asarray(prompts)[:, :-1] - lm.DIGIT0).sum(-1) % SPEC.modulus
    rewarded = np.asarray(lm.task_reward(SPEC, completions, answers))
    # well-formed demonstrations are right: the reward share is 1 − noise up to 4 binomial errors (σ ≈ 0.008)
    assert abs(rewarded.mean() - (1 - noise)) < 0.035
    lengths = np.asarray(lm.response_mask(SPEC, completions)).sum(-1)
    assert set(np.unique(lengths[rewarded == 1])) == {4, 6, 8, 10}  # 0 … 3 reasoning steps
    runaway = ~np.asarray(completions == lm.EOS).any(-1)
    assert 0.05 < runaway.mean() < 0.15  # a third of the malformed ones have no EOS (expected 0.1)
    assert np.all(np.asarray(completions)[runaway] >= lm.DIGIT0 - 3)  # no PAD inside a truncated completion


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_start_stops_near_the_target_and_reports_its_accuracy(start):
    # the stop lies between two adjacent SFT steps that straddle the target, measured with the same key (common
    # random numbers), so it lands within half one step's change: a few of the 188 completions, < 0.05
    assert abs(start.accuracy - TARGET) < 0.05 and start.steps > 0
    again = float(pretrain.eval_accuracy(SPEC, start.params, jax.random.key(11)))
    n = pretrain.EVAL_SAMPLES * len(lm.eval_prompts(SPEC)[1])
    # two independent measurements of the same accuracy differ by at most 4 standard errors of their difference
    assert abs(again - start.accuracy) < 4 * np.sqrt(2 * TARGET * (1 - TARGET) / n)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_the_cache_returns_the_same_start_and_matches_a_fresh_training(start, cache_root, monkeypatch):
    monkeypatch.setenv(pretrain.CACHE_ENV, str(cache_root))
    files = list((cache_root / "lm").glob("sft-*.eqx"))
    assert len(files) == 1

    def no_training(*args):
        raise AssertionError("trained although cached")

    monkeypatch.setattr(pretrain, "train_start", no_training)
    loaded = pretrain.pretrained_start(SPEC, SHAPE, TARGET, seed=3)
    assert (loaded.accuracy, loaded.steps) == (start.accuracy, start.steps)
    jax.tree.map(np.testing.assert_array_equal, loaded.params, start.params)
    jax.tree.map(np.testing.assert_array_equal, pretrain.pretrained_policy(SPEC, SHAPE, TARGET, 3), start.params)
    with pytest.raises(AssertionError, match="trained although cached"):  # another seed is another file
        pretrain.pretrained_policy(SPEC, SHAPE, TARGET, 4)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_an_unreadable_cache_file_is_trained_again_and_replaced(start, tmp_path, monkeypatch):
    monkeypatch.setenv(pretrain.CACHE_ENV, str(tmp_path))
    pretrain.pretrained_start(SPEC, SHAPE, TARGET, seed=3)  # a cached copy of `start` under tmp_path
    (path,) = (tmp_path / "lm").glob("sft-*.eqx")
    path.write_bytes(path.read_bytes()[:100])  # truncated, as a killed writer without the rename would leave it
    calls = []
    monkeypatch.setattr(pretrain, "train_start", lambda *args: calls.append(args) or start)
    again = pretrain.pretrained_start(SPEC, SHAPE, TARGET, seed=3)
    assert len(calls) == 1 and again.steps == start.steps
    assert path.stat().st_size > 100  # replaced by a whole file


def test_the_cache_key_changes_with_the_architecture(monkeypatch):
    before = pretrain.start_settings(SPEC, SHAPE, TARGET, 3, pretrain.DEFAULT_START_FORMAT)
    assert pretrain.start_settings(SPEC, SHAPE, TARGET, 3, 0.5) != before  # another start format is another start
    monkeypatch.setattr(pretrain, "MLP_RATIO", pretrain.MLP_RATIO + 1)
    assert pretrain.start_settings(SPEC, SHAPE, TARGET, 3, pretrain.DEFAULT_START_FORMAT) != before


@pytest.mark.slow  # a second SFT run (~5 s); the cache test covers the default suite's reuse of one
def test_training_again_from_the_seed_gives_the_same_start(start):
    fresh = pretrain.pretrained_start(SPEC, SHAPE, TARGET, seed=3, cache=False)
    assert (fresh.accuracy, fresh.steps) == (start.accuracy, start.steps)
    jax.tree.map(np.testing.assert_array_equal, fresh.params, start.params)


def test_cache_dir_follows_the_environment(tmp_path):
    assert pretrain.cache_dir({pretrain.CACHE_ENV: str(tmp_path)}) == tmp_path / "lm"
    assert pretrain.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "pgrpo-sim" / "lm"


@pytest.mark.parametrize(
    "args, message",
    [
        ((SPEC, SHAPE, 0.0, 0), "start_accuracy must be in"),
        ((SPEC, SHAPE, 0.99, 0), "start_accuracy must be in"),
        ((SPEC, SHAPE, 0.2, -1), "seed must be in"),
        ((SPEC, lm.task_policy_shape(lm.TaskSpec()), 0.2, 0), "shape must have vocab"),
        ((SPEC, SHAPE, 0.2, 0, 0.1), "cannot exceed start_format"),
        ((SPEC, SHAPE, 0.2, 0, 1.5), "start_format must be in"),
    ],
)
def test_bad_settings_are_refused(args, message):
    with pytest.raises(PgrpoSimError, match=message):
        pretrain.pretrained_start(*args[:4], start_format=args[4] if len(args) > 4 else 0.9)


@pytest.mark.slow  # a second SFT run
def test_a_format_limited_start_hides_right_answers_behind_its_format(cache_root, monkeypatch):
    """start_format 0.2 at accuracy 0.05: the start writes the format about as often as its demonstrations, and is
    right far more often among its well-formed completions than overall (the knowledge a base model hides)."""
    monkeypatch.setenv(pretrain.CACHE_ENV, str(cache_root))
    start = pretrain.pretrained_start(SPEC, SHAPE, 0.05, seed=3, start_format=0.2)
    prompts, answers = lm.eval_prompts(SPEC)
    prompts, answers = np.tile(prompts, (8, 1)), np.tile(answers, 8)
    keys = jax.random.split(jax.random.key(5), len(answers))
    draw = jax.vmap(lm.sample, in_axes=(None, 0, 0, None, None))
    completions, _ = draw(start.params, prompts, keys, 1.0, SPEC.max_response_len)
    formed = np.asarray(lm.format_ok(SPEC, completions))
    right = np.asarray(lm.task_reward(SPEC, completions, answers))
    n = len(answers)  # 376 completions: a share's standard error is at most 0.026
    assert abs(formed.mean() - 0.2) < 0.1  # SFT imitates the demonstrations' share, to within 4 s.e. and early stopping
    assert right[formed].mean() > 2 * right.mean() and n == 8 * 47


def test_high_starts_imitate_fuller_demonstrations():
    """Above `UNIFORM_CAP` a share `full_share` of the demonstrations writes every reasoning step (imitating varied
    lengths caps the accuracy near 0.4); up to it the recipe and the cache key are as they were."""
    assert pretrain.full_share(0.2) == pretrain.full_share(pretrain.UNIFORM_CAP) == 0.0
    assert pretrain.full_share(pretrain.MAX_START_ACCURACY) == 1.0
    assert pretrain.full_share(0.625) == pytest.approx(0.5, abs=1e-3)  # halfway from 0.3 to 0.95
    low = pretrain.start_settings(SPEC, SHAPE, 0.3, 0, 0.9)
    assert "full_share" not in low["sft"] and pretrain.start_settings(SPEC, SHAPE, 0.8, 0, 0.9)["sft"]["full_share"] > 0
    _prompts, completions = pretrain.demonstrations(SPEC, jax.random.key(0), 400, 0.0, 1.0)
    lengths = np.asarray(lm.response_mask(SPEC, completions)).sum(-1)
    assert np.all(lengths == SPEC.solution_len)  # every step written
    _, varied = pretrain.demonstrations(SPEC, jax.random.key(0), 400, 0.0, 0.0)
    assert len(np.unique(np.asarray(lm.response_mask(SPEC, varied)).sum(-1))) > 1
