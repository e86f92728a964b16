"""Options of the rollout correction (:mod:`legorl_embedded.objectives.correction`): pydantic only."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class Rejection(BaseModel):
    """One rejection mask: a ratio band a token (``token_k1``) or a trial (``seq_*``) must lie in."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["token_k1", "seq_sum_k1", "seq_mean_k1"] = Field(
        description="token_k1: each token's ratio; seq_sum_k1: the trial's product ratio; "
        "seq_mean_k1: the trial's geometric-mean ratio."
    )
    low: float = Field(default=0.0, ge=0.0, description="Lowest ratio kept.")
    high: float = Field(gt=0.0, description="Highest ratio kept.")

    @field_validator("high")
    @classmethod
    def _above_low(cls, high: float, info: ValidationInfo) -> float:
        low = info.data.get("low", 0.0)
        if high <= low:
            raise ValueError(f"high ({high}) must be above low ({low})")
        return high


class RolloutCorrection(BaseModel):
    """Importance weights and rejection masks against the trainer/inference mismatch."""

    model_config = ConfigDict(extra="forbid")

    is_level: Literal["token", "sequence"] | None = Field(
        default="token", description="Importance weights per token, per trial (product), or none."
    )
    is_threshold: float | tuple[float, float] = Field(
        default=2.0,
        description="A number C: truncate the weights at C (TIS); [low, high]: weights outside "
        "weigh 0 (IcePop's two-sided mask).",
    )
    reject: list[Rejection] = Field(
        default_factory=list,
        description="Rejection masks, all applied: e.g. [{mode: token_k1, high: 2}] (masked IS), "
        "[{mode: seq_mean_k1, low: 0.999, high: 1.001}] (geometric-mean sequence mask).",
    )

    @field_validator("is_threshold")
    @classmethod
    def _threshold(cls, value: float | tuple[float, float]) -> float | tuple[float, float]:
        if isinstance(value, tuple):
            low, high = value
            if not 0 <= low < high:
                raise ValueError(f"an IcePop band needs 0 <= low < high, got [{low}, {high}]")
        elif value <= 0:
            raise ValueError(f"a truncation cap must be positive, got {value}")
        return value


class CorrectionOption(BaseModel):
    """The ``tis_cap`` / ``correction`` pair of a token-level objective's options."""

    tis_cap: float | None = Field(
        default=2.0,
        gt=0.0,
        description="Cap of the token trainer/inference importance weight (TIS); null disables it. "
        "Shorthand for correction: {is_level: token, is_threshold: CAP}.",
    )
    correction: RolloutCorrection | None = Field(
        default=None,
        description="Rollout correction in full (token or sequence IS, TIS or IcePop, rejection "
        "masks: MIS, geometric-mean sequence mask); set it or tis_cap, not both.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> Any:
        if self.correction is not None and "tis_cap" in self.model_fields_set:
            raise ValueError("set tis_cap or correction, not both (correction.is_threshold is the cap)")
        return self

    def rollout_correction(self) -> RolloutCorrection:
        if self.correction is not None:
            return self.correction
        return RolloutCorrection(is_level=None) if self.tis_cap is None else RolloutCorrection(is_threshold=self.tis_cap)
