"""Capped exponential backoff with jitter; the RNG is passed in so tests are deterministic."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial: float = 0.5
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5  # each delay is scaled by a uniform factor in [1 - jitter, 1 + jitter]
    rng: random.Random = field(default_factory=random.Random)
    _attempt: int = 0

    def next(self) -> float:
        base = min(self.cap, self.initial * self.factor ** self._attempt)
        self._attempt += 1
        return min(self.cap, base * self.rng.uniform(1.0 - self.jitter, 1.0 + self.jitter))

    def reset(self) -> None:
        self._attempt = 0
