"""The continuous oscillator and its relatives (docs/design.md §2.1–2.2): the closed forms of the damped oscillator
(`theory`), the reduced SDE it drives (`sde`) and the exact discrete heavy-ball map it approximates (`linear`)."""
