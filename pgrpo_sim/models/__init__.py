"""The three levels of model: the continuous oscillator (`theory`), the exact discrete map (`linear`), the
exact softmax bandit (`grpo` pieces, `config`, `bandit`) and the reduced SDE (`sde`). See docs/design.md."""
