"""The language-model level's GRPO loss against TRL's own `GRPOTrainer._compute_loss` on the same token
log-probabilities, masks and advantages: loss, gradient and clip read-outs, every loss type, with and without clip,
β = 0 and β > 0, token- and sequence-level ratios. Needs the `peer` extra (`pip install -e '.[peer]'`); skipped
without TRL, and slow (TRL imports transformers)."""

import itertools
import types

import jax
import numpy as np
import pytest

from pgrpo_sim.models.lm.loss import LOSS_TYPES, grpo_loss

from .test_loss import ITEMS, ROLLOUT, STEPS_PER_GENERATION, WIDTH

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow


class _Accelerator:
    """One process: gather and reduce return their argument."""

    num_processes = 1
    sync_gradients = True

    @staticmethod
    def gather(x):
        return x

    gather_for_metrics = gather

    @staticmethod
    def reduce(x, reduction="sum"):
        return x


def _trl_loss(loss_type, eps_low, eps_high, beta, level):
    """TRL 1.x `GRPOTrainer._compute_loss`, unbound, on a stand-in trainer whose model returns the fixture's
    log-probabilities (float32, with gradient); returns the loss, d loss / d logp and TRL's logged metrics."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    logp, old_logp, ref_logp, adv, mask = (torch.tensor(np.asarray(x, np.float32)) for x in ROLLOUT)
    logp.requires_grad_(True)
    metrics = {"train": {}}
    trainer = types.SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *args, **kwargs: (logp, torch.zeros_like(logp), None),
        aux_loss_enabled=False,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=level,
        beta=beta,
        args=types.SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=STEPS_PER_GENERATION),
        loss_type=loss_type,
        epsilon_low=eps_low,
        epsilon_high=eps_high,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=WIDTH,
        accelerator=_Accelerator(),
        _entropy_bonus_enabled=False,
        _metrics={"train": _Metrics(metrics["train"])},
    )
    n = logp.shape[0]
    inputs = dict(
        prompt_ids=torch.zeros((n, 1), dtype=torch.long),
        prompt_mask=torch.ones((n, 1), dtype=torch.long),
        completion_ids=torch.zeros((n, WIDTH), dtype=torch.long),
        completion_mask=mask.long(),
        advantages=adv,
        old_per_token_logps=old_logp,
        ref_per_token_logps=ref_logp,
        num_items_in_batch=torch.tensor(ITEMS),
    )
    loss = GRPOTrainer._compute_loss(trainer, None, inputs)
    loss.backward()
    return loss.item(), logp.grad.numpy(), {k: v[-1] for k, v in metrics["train"].items()}


class _Metrics(dict):
    """TRL's `defaultdict(list)` of metrics, writing into `store`."""

    def __init__(self, store):
        super().__init__()
        self.store = store

    def __getitem__(self, key):
        return self.store.setdefault(key, [])


@pytest.mark.parametrize(
    "loss_type, clip, beta, level",
    list(itertools.product(LOSS_TYPES, ("clip", "no clip"), (0.0, 0.04), ("token", "sequence"))),
    ids=str,
)
def test_loss_gradient_and_clip_read_outs_equal_trls(loss_type, clip, beta, level):
    """Both float32 on the same inputs, differing only in the order of float32 operations: ≤ 45 terms of size ≤ ~3,
    each rounded at ε32 = 1.2e-7 → ≤ 1.6e-5, so 2e-5 (as against the NumPy reference)."""
    eps_low, eps_high = (0.2, 0.28) if clip == "clip" else (np.inf, np.inf)
    want_loss, want_grad, metrics = _trl_loss(loss_type, eps_low, eps_high, beta, level)
    f32 = lambda x: np.asarray(x, np.float32)
    logp, old_logp, ref_logp, adv, mask = (f32(x) for x in ROLLOUT)
    (loss, stats), grad = jax.value_and_grad(
        lambda lp: grpo_loss(
            lp, old_logp, adv, mask, loss_type=loss_type, epsilon=f32(eps_low), epsilon_high=f32(eps_high),
            beta=f32(beta), ref_logp=ref_logp, num_items_in_batch=f32(ITEMS),
            steps_per_generation=STEPS_PER_GENERATION, importance_sampling_level=level,
        ),
        has_aux=True,
    )(logp)  # fmt: skip
    np.testing.assert_allclose(loss, want_loss, rtol=0, atol=2e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=2e-5)
    if loss_type == "cispo":
        np.testing.assert_allclose(stats.clip_high, metrics["cispo_clip_ratio"], atol=1e-6)
    else:
        got = [stats.clip_low, stats.clip_high, stats.clip_region]
        want = [metrics[f"clip_ratio/{name}_mean"] for name in ("low", "high", "region")]
        np.testing.assert_allclose(got, want, atol=1e-6)
    if beta:
        np.testing.assert_allclose(stats.kl, metrics["kl"], rtol=1e-5)
