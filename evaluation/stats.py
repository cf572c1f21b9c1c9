"""Paired statistics for comparing a config with a baseline on the same questions (used by evaluation/report.py).

The unit of analysis is the question. With several runs per question the runs are not independent samples (same
question, same retrieval, often the same answer), so a question's runs are first reduced to one value (the mean of
the per-run differences for continuous scores, the majority outcome for binary ones) and everything below resamples,
tests and counts questions.

- `question_means`: per-question mean of values given per (question, run).
- `bootstrap_ci`: BCa bootstrap interval of the mean over questions (scipy), percentile when BCa is degenerate, a
  zero-width interval when every value is equal or there is a single question.
- `sign_flip_pvalue`: two-sided paired randomization (sign-flip) test of "mean difference = 0" over questions.
- `majority_outcome`, `mcnemar_counts`, `mcnemar_exact`: exact McNemar test on the discordant questions.
- `holm`: Holm's step-down adjustment of a family of p-values.
- `mde_mean`, `questions_needed_mean`, `mde_mcnemar`, `questions_needed_mcnemar`: minimum detectable difference at
  a given power (normal approximations; see each function).
- `pareto_front`: the configs no other config beats on both accuracy and cost.

Every function returns plain floats / ints / None (never NaN), so results go into JSON as they are.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from statistics import NormalDist

import numpy as np
from scipy import stats as _st

ALPHA = 0.05  # two-sided significance level of every test and of the power calculations
POWER = 0.80
CONFIDENCE = 0.95
SEED = 0
_BATCH_VALUES = 2**21  # resampled values held at once by scipy (16 MiB of float64), whatever the question count


def _batch(n: int) -> int:
    """Resamples per scipy batch for n values; >= the default resample count for small n, so small inputs give
    exactly scipy's unbatched result under the same seed."""
    return max(1, _BATCH_VALUES // max(n, 1))


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1-alpha/2} + z_{power}: 1.959964 + 0.841621 = 2.801585 for alpha 0.05, power 0.8."""
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def question_means(values: Iterable[tuple[Hashable, float]]) -> dict:
    """(question, value) pairs, one per run → {question: mean over its runs}, in first-seen question order."""
    acc: dict = defaultdict(list)
    for q, v in values:
        acc[q].append(float(v))
    return {q: sum(vs) / len(vs) for q, vs in acc.items()}


def bootstrap_ci(
    values: Sequence[float], confidence: float = CONFIDENCE, resamples: int = 9999, seed: int = SEED
) -> dict:
    """Bootstrap interval of the mean of `values` (one value per question: resampling them resamples questions).

    scipy.stats.bootstrap, method BCa, `rng=np.random.default_rng(seed)` (deterministic). BCa needs a jackknife
    with some spread; when it cannot be computed (NaN bounds) the percentile interval is used instead. All values
    equal (or a single value) → the point itself as a zero-width interval. Returns
    {"mean", "low", "high", "method": "BCa" | "percentile" | "degenerate"}.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    mean = float(x.mean())
    if x.size < 2 or np.ptp(x) == 0:
        return {"mean": mean, "low": mean, "high": mean, "method": "degenerate"}
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning / divide warnings: handled by the NaN check
            res = _st.bootstrap(
                (x,),
                np.mean,
                n_resamples=resamples,
                confidence_level=confidence,
                method=method,
                vectorized=True,
                batch=_batch(x.size),
                rng=np.random.default_rng(seed),
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            # BCa / percentile bounds are bootstrap means, so they lie within [min, max]; order them defensively
            return {"mean": mean, "low": min(low, high), "high": max(low, high), "method": method}
    return {"mean": mean, "low": mean, "high": mean, "method": "degenerate"}


def sign_flip_pvalue(values: Sequence[float], resamples: int = 9999, seed: int = SEED) -> float:
    """Two-sided paired randomization test of mean(values) = 0, one value (a per-question mean difference) per
    question: under the null each question's difference is as likely to have either sign. Exact (all 2^n sign
    patterns) when 2^n <= `resamples`, otherwise a seeded Monte Carlo sample (scipy.stats.permutation_test,
    permutation_type "samples"). All differences 0, or a single question (either sign is as extreme) → 1.0."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.any(x):
        return 1.0
    res = _st.permutation_test(
        (x,),
        lambda d, axis: np.mean(d, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        batch=_batch(x.size),
        rng=np.random.default_rng(seed),
    )
    return min(1.0, float(res.pvalue))


def majority_outcome(outcomes: Sequence[bool]) -> bool:
    """One binary outcome per question from its runs: true when true in more than half of the runs, false when in
    fewer; an even split is decided by the first run given (callers pass runs in run order, so run 0 decides)."""
    if not outcomes:
        raise ValueError("majority_outcome needs at least one run")
    yes = sum(bool(o) for o in outcomes)
    if 2 * yes != len(outcomes):
        return 2 * yes > len(outcomes)
    return bool(outcomes[0])


def mcnemar_counts(pairs: Iterable[tuple[bool, bool]]) -> tuple[int, int, int]:
    """(config, baseline) outcome per question → (b, c, n): b = config only, c = baseline only, n = questions."""
    b = c = n = 0
    for mine, base in pairs:
        n += 1
        b += bool(mine) and not bool(base)
        c += bool(base) and not bool(mine)
    return b, c, n


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: under the null each of the b + c discordant questions is equally likely to
    go either way, so b ~ Binomial(b + c, 1/2); p = binomtest(b, b + c, 0.5).pvalue (1.0 when b + c = 0).
    E.g. b=0, c=5 → 2·0.5^5 = 0.0625."""
    if b < 0 or c < 0:
        raise ValueError("b and c are counts")
    if b + c == 0:
        return 1.0
    return min(1.0, float(_st.binomtest(int(b), int(b + c), 0.5).pvalue))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment for a family of m tests (None entries are not tests and stay None).

    Sort ascending p_(1) <= … <= p_(m); adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) · p_(j)), i.e. each
    p-value is multiplied by the number of hypotheses not yet rejected, then made monotone (never smaller than an
    earlier, smaller p) and capped at 1. Returned in the input order. Ties keep their input order (the result is
    the same either way)."""
    tests = [(i, p) for i, p in enumerate(pvalues) if p is not None]
    m = len(tests)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (i, p) in enumerate(sorted(tests, key=lambda t: t[1])):
        running = max(running, min(1.0, (m - rank) * float(p)))
        out[i] = running
    return out


def mde_mean(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable mean paired difference (normal approximation, two-sided):
    MDE = (z_{1-alpha/2} + z_{power}) · SD_d / sqrt(n), with SD_d the SD of the per-question differences and n the
    number of questions. SD 1, n 100 → 2.801585 / 10 = 0.2801585. None when n = 0."""
    if n <= 0:
        return None
    return z_sum(alpha, power) * float(sd) / math.sqrt(n)


def questions_needed_mean(sd: float, delta: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Questions needed to detect a mean paired difference `delta` at SD_d `sd`: ceil(((z_a + z_b) · sd / delta)^2)
    (the inverse of `mde_mean`). None when delta <= 0."""
    if delta <= 0:
        return None
    return max(1, math.ceil((z_sum(alpha, power) * float(sd) / delta) ** 2 - 1e-9))


def _connor_n(delta: float, psi: float, alpha: float, power: float) -> float:
    """Connor (1987) normal approximation for McNemar's test:
    n = (z_a·sqrt(psi) + z_b·sqrt(psi - delta²))² / delta² questions to detect a difference `delta` = p10 - p01
    in paired proportions at discordant rate psi = p10 + p01."""
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    return (za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (delta * delta)


def mde_mcnemar(psi: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable difference in the proportion of questions with the outcome (config rate - baseline rate)
    for McNemar's test with n questions at discordant rate psi ((b + c) / n): the delta at which Connor's sample
    size `_connor_n(delta, psi)` equals n, solved by bisection on (0, 1]. Roughly (z_a + z_b) · sqrt(psi / n) for
    small differences. Capped at 1.0 (a few questions can detect nothing smaller). None when n = 0 or psi <= 0 (no
    discordant questions: use a planning value instead)."""
    if n <= 0 or psi <= 0:
        return None
    lo, hi = 0.0, 1.0
    # n(delta) decreases as delta grows; at delta = 1 it is <= (z_a + z_b)^2 ~ 7.85, so small n may find no root
    if _connor_n(hi, psi, alpha, power) > n:
        return 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if _connor_n(mid, psi, alpha, power) > n:
            lo = mid
        else:
            hi = mid
    return hi


def questions_needed_mcnemar(psi: float, delta: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Questions needed to detect a difference `delta` in the proportion with the outcome at discordant rate psi
    (Connor). None when delta <= 0 or delta > psi (a difference larger than the share of discordant questions
    cannot occur at that discordant rate)."""
    if delta <= 0 or psi <= 0 or delta > psi:
        return None
    return max(1, math.ceil(_connor_n(delta, psi, alpha, power) - 1e-9))


def null_binary_sd(rate: float) -> float:
    """Planning SD of a paired difference of two independent binary outcomes with a common success rate p:
    sqrt(2·p·(1 - p)); p = 0.5 (the largest, sqrt(0.5) ~ 0.707) when p is 0 or 1. Used when the observed SD of the
    differences is 0, where an MDE of 0 would claim infinite resolution."""
    p = rate if 0 < rate < 1 else 0.5
    return math.sqrt(2 * p * (1 - p))


def null_discordant_rate(rate: float) -> float:
    """Planning discordant rate of two independent binary outcomes with a common rate p: 2·p·(1 - p) (0.5 when p is
    0 or 1). Used by the McNemar MDE when no question was discordant."""
    p = rate if 0 < rate < 1 else 0.5
    return 2 * p * (1 - p)


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """{name: (cost, accuracy)} → the names no other point dominates (cost <= and accuracy >= with one strict), by
    increasing cost: the accuracy-vs-cost frontier. Points with equal cost and accuracy are all on it."""
    front = [
        n
        for n, (c, a) in points.items()
        if not any(c2 <= c and a2 >= a and (c2, a2) != (c, a) for c2, a2 in points.values())
    ]
    return sorted(front, key=lambda n: (points[n][0], -points[n][1]))
