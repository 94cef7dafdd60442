"""The language-model level's GRPO loop written in PyTorch, as a practitioner would: the baseline of `bench_lm`.

Same work per GRPO step as `pgrpo_sim.models.lm.make_run` with `lm.config()`'s defaults: the task's prompts
(k = 4 operand digits mod 10 and `=`), a pre-LN causal transformer (width 64, 2 layers, 4 heads, MLP 2×, learned
positions), 32 prompts × G 8 completions of ≤ 16 tokens sampled with a key/value cache at T = 1, the verifier's
reward (digits, `<ans>`, the answer, `</ans>`, EOS), group advantages (TRL's ε 1e-4), one teacher-forced pass with
gradients, DAPO's clipped token-level loss (ε 0.2), global-norm clipping at 1 and AdamW (lr 1e-3), and a greedy
evaluation on 256 prompts every 10 steps. Batched over the generation batch (PyTorch's own way), one run at a time,
from a random start (speed only; the numbers are not compared with the JAX level's).
"""

from __future__ import annotations

import math

import torch
from torch import nn

PAD, EOS, ANS_OPEN, ANS_CLOSE, QUERY, DIGIT0 = 0, 1, 2, 3, 4, 5
MODULUS, OPERANDS, MAX_NEW = 10, 4, 16
VOCAB = DIGIT0 + MODULUS
PROMPT_LEN = OPERANDS + 1
MAX_LEN = PROMPT_LEN + MAX_NEW


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x, cache=None, start=0):
        """x [B, T, width]; cache (keys, values) [B, heads, S, head_dim] of earlier positions, or None."""
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        visible = torch.arange(k.shape[2])[None, :] <= (start + torch.arange(t))[:, None]
        attended = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1) @ v
        x = x + self.out(attended.transpose(1, 2).reshape(b, t, w))
        return x + self.mlp(self.ln2(x)), (k, v)


class Policy(nn.Module):
    def __init__(self, width: int = 64, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed, self.positions = nn.Embedding(VOCAB, width), nn.Embedding(MAX_LEN, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln, self.unembed = nn.LayerNorm(width), nn.Linear(width, VOCAB, bias=False)

    def forward(self, tokens, caches=None, start=0):
        x = self.embed(tokens) + self.positions(start + torch.arange(tokens.shape[1]))
        new = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, None if caches is None else caches[i], start)
            new.append(cache)
        return self.unembed(self.ln(x)), new

    @torch.no_grad()
    def sample(self, prompts, temperature: float):
        logits, caches = self(prompts)
        logits, done, out = logits[:, -1], torch.zeros(len(prompts), dtype=torch.bool), []
        for i in range(MAX_NEW):
            token = logits.argmax(-1) if temperature == 0 else torch.multinomial(torch.softmax(logits, -1), 1)[:, 0]
            token = torch.where(done, torch.full_like(token, PAD), token)
            out.append(token)
            done = done | (token == EOS)
            if i < MAX_NEW - 1:
                step, caches = self(token[:, None], caches, PROMPT_LEN + i)
                logits = step[:, -1]
        return torch.stack(out, 1)


def prompts(n: int, generator):
    operands = torch.randint(0, MODULUS, (n, OPERANDS), generator=generator)
    tokens = torch.cat([operands + DIGIT0, torch.full((n, 1), QUERY)], 1)
    return tokens, operands.sum(-1) % MODULUS


def reward(completions, answers):
    """1 for digits, `<ans>`, the answer digit, `</ans>`, EOS (then PAD); else 0."""
    is_digit = completions >= DIGIT0
    opened = (completions == ANS_OPEN).int()
    first_open = torch.where(opened.any(1), opened.argmax(1), torch.full_like(answers, MAX_NEW))
    pos = torch.arange(MAX_NEW)[None, :]
    digits_before = ((pos >= first_open[:, None]) | is_digit).all(1)
    at = lambda offset: completions.gather(1, (first_open[:, None] + offset).clamp(max=MAX_NEW - 1))[:, 0]
    fits = first_open + 3 < MAX_NEW
    ok = digits_before & fits & (at(2) == ANS_CLOSE) & (at(3) == EOS) & (at(1) >= DIGIT0)
    return (ok & (at(1) == answers + DIGIT0)).float()


def run(steps: int = 100, prompts_per_step: int = 32, group: int = 8, seed: int = 0, eval_every: int = 10) -> float:
    """`steps` GRPO steps; returns the last rollout's mean reward."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    policy = Policy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    held_out, held_answers = prompts(256, generator)
    mean = 0.0
    for step in range(steps):
        if step % eval_every == 0:
            reward(policy.sample(held_out, 0.0), held_answers).mean()
        tokens, answers = prompts(prompts_per_step, generator)
        tokens, answers = tokens.repeat_interleave(group, 0), answers.repeat_interleave(group)
        completions = policy.sample(tokens, 1.0)
        rewards = reward(completions, answers)
        groups = rewards.view(prompts_per_step, group)
        advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).view(-1)
        ended = (completions == EOS).int()
        length = torch.where(ended.any(1), ended.argmax(1) + 1, torch.full_like(answers, MAX_NEW))
        mask = (torch.arange(MAX_NEW)[None, :] < length[:, None]).float()
        logits, _ = policy(torch.cat([tokens, completions], 1)[:, :-1])
        logp_all = torch.log_softmax(logits[:, PROMPT_LEN - 1 :], -1)
        logp = logp_all.gather(-1, completions[..., None])[..., 0]
        with torch.no_grad():  # read out, as the JAX loop's `entropy`
            entropy = float((-(logp_all.exp() * logp_all).sum(-1) * mask).sum() / mask.sum())
        ratio = torch.exp(logp - logp.detach())
        surrogate = torch.minimum(ratio * advantages[:, None], ratio.clamp(0.8, 1.2) * advantages[:, None])
        loss = -(surrogate * mask).sum() / mask.sum()  # DAPO: token mean over the batch
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        mean = float(rewards.mean())
    return mean if math.isfinite(entropy) else math.nan
