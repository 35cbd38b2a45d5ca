"""Audit numbers must not depend on which SIMD kernels numpy picks for the CPU (AVX-512
or not). numpy's exp dispatches to CPU-specific kernels whose last bits differ; the FICO
repayment table, which every lending-2 audit reads, is therefore computed with the C
library's exp value by value (docs/limits.md, Reproducibility). On an AVX-512 machine the
numpy-kernel table differed from this in the last bits, and so did every lending-2
audit."""

from __future__ import annotations

import math

import numpy as np

from causalfair.systems.lending.fico import SCORE_MAX, bin_midpoints, fico_repay, load_fico_logit


def test_fico_repayment_table_is_the_c_librarys_logistic_bit_for_bit():
    coefs = load_fico_logit()["coefficients"]
    for K in (7, 20, 101):
        table = fico_repay(K)
        mid = bin_midpoints(K)
        for g in (0, 1):
            for k, score in enumerate(mid.tolist()):
                s = score / SCORE_MAX
                eta = coefs["const"] + coefs["score"] * s + g * (
                    coefs["group"] + coefs["score_x_group"] * s)
                assert table[g, k] == 1.0 / (1.0 + math.exp(-eta)), (K, g, k)
    assert np.all((table > 0) & (table < 1))
