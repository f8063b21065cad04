"""Normal and Student's t quantiles (stats/quantiles.py)."""

import pytest

from pytest_llmperf.stats.quantiles import t_quantile, z_value


@pytest.mark.parametrize("dof, exact", [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042)])
def test_t_quantiles(dof, exact):
    assert t_quantile(0.975, dof) == pytest.approx(exact, rel=3e-3)


def test_confidence_must_be_sensible():
    assert z_value(0.95) == pytest.approx(1.645, abs=1e-3)  # one-sided: each claim points one way
    assert z_value(0.975) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError):
        z_value(1.0)
