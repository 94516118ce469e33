"""Optional parts of the plugin contract are declared protocols: a config model's
check_limits (channel.ChecksLimits), found with isinstance, and run at load."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from powerplane.channel import ChecksLimits


class _Checked(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    wait_s: float = 1.0

    def check_limits(self, timeout_s: float) -> list[tuple[str, str]]:
        return [("wait_s", "too long")] if self.wait_s >= timeout_s else []


class _Plain(BaseModel):
    wait_s: float = 1.0


def test_a_config_model_with_check_limits_is_a_checks_limits() -> None:
    assert isinstance(_Checked(), ChecksLimits)
    assert not isinstance(_Plain(), ChecksLimits)
    checked: ChecksLimits = _Checked(wait_s=5)  # the protocol types the contract
    assert checked.check_limits(2) == [("wait_s", "too long")]


def test_the_loader_runs_a_declared_check_limits() -> None:
    from powerplane.config import _limit_problems

    problems = _limit_problems(_Checked(wait_s=5), 2.0, ("channels", "w"), {})
    assert [(p.path, p.message) for p in problems] == [("channels.w.wait_s", "too long")]
    assert _limit_problems(_Plain(), 2.0, ("channels", "w"), {}) == []
