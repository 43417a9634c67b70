"""Certified ranges of fixed-offset RoPE heads (paper eq. 10): ideal (continued fractions) and realized.

`certified_range` in ideal mode does not import torch.
"""

from formal_rope.certify.ideal import FirstViolation, first_violation
from formal_rope.certify.range import MODES, CertifiedRange, certified_range, scale_overflows

__all__ = ["CertifiedRange", "FirstViolation", "MODES", "certified_range", "first_violation", "scale_overflows"]
