"""What periods "auto" gives a periodic encoding (rope_p, sipe_p): plain Python, no numpy or torch,
so the theory stage (torch- and numpy-free) and training read one rule."""

from __future__ import annotations

# "auto" never resolves to period 1: a period-1 rope_p/sipe_p table rotates (adds) nothing, so such a
# run would repeat the NoPE run. An LTL[P] language (least period 1) is in LTL[P,MOD_2] too (1 divides
# 2), so the prediction for period 2 is still "expressible".
AUTO_MIN_PERIOD = 2


def auto_periods(mod_k: int) -> tuple[int, ...]:
    """The periods "auto" resolves to for a language whose least period (the k of LTL[P,MOD_k]) is
    `mod_k`: (mod_k,), but at least AUTO_MIN_PERIOD, so every periodic run rotates."""
    return (max(AUTO_MIN_PERIOD, int(mod_k)),)


def auto_periods_note(mod_k: int) -> str:
    """What `auto_periods` did, for the run's notes: empty unless the least period was raised."""
    periods = auto_periods(mod_k)
    if periods == (max(1, int(mod_k)),):
        return ""
    return (f"periods auto resolved to {periods[0]}: the language's least period is {mod_k} (it is in LTL[P]), "
            f"and a period-1 table rotates nothing (the run would be NoPE); period {periods[0]} rotates, "
            f"and L ∈ LTL[P] ⊆ LTL[P,MOD_{periods[0]}] keeps it expressible")
