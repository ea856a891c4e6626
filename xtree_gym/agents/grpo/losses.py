"""Losses as pure functions on tensors: clipped policy ratio, k3 KL, OPSD (Eq. 4), SFT CE.

Shapes: every per-token tensor is ``[B, T]`` (rows × target positions), ``mask`` is ``[B, T]``
with 1.0 on the tokens that count (completion tokens of the row) and 0.0 elsewhere.

Loss normalisation (written down and tested): :func:`masked_mean` with ``denom=None`` is the mean
over all masked tokens of the batch ("token-mean", as DAPO / TRL's ``loss_type="dapo"``); the
trainer passes ``denom`` = the masked-token count of the whole optimizer step, so that gradient
accumulation over micro-batches sums to exactly that token-mean.
"""

from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: float | None = None) -> torch.Tensor:
    """``Σ x·mask / denom`` (``denom`` defaults to ``Σ mask``, at least 1).

    Example:
        >>> x = torch.tensor([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]])
        >>> m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
        >>> masked_mean(x, m).item(), masked_mean(x, m, denom=6).item()
        (2.0, 1.0)
    """
    total = (x * mask).sum()
    if denom is None:
        denom = max(float(mask.sum().item()), 1.0)
    return total / denom


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    denom: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate, negated: ``−min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A)``, token-mean.

    ``advantages`` is ``[B]`` (one per row, broadcast over its tokens) or ``[B, T]``. ``mask`` may be
    0/1 or per-token loss weights (the trainer passes :func:`loss_weights`). Returns ``(loss,
    clip_fraction)``; the fraction is the share of the tokens with a nonzero mask where clipping bit
    (a count share, whatever the weights: with weights as the mask, a weighted mean would shrink it).

    Example:
        >>> lp = torch.tensor([[0.0, 0.0]]); m = torch.ones(1, 2)
        >>> old = torch.log(torch.tensor([[0.5, 2.0]])).neg()  # ρ = 0.5 and 2.0
        >>> loss, frac = clipped_policy_loss(lp, old, torch.tensor([1.0]), m)
        >>> round(loss.item(), 4), frac.item()  # -(0.5 + 1.2) / 2: the ρ = 2 token is clipped
        (-0.85, 0.5)
        >>> clipped_policy_loss(lp, old, torch.tensor([1.0]), torch.tensor([[0.1, 0.3]]))[1].item()
        0.5
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    bit = (clipped < unclipped).float()
    with torch.no_grad():
        frac = masked_mean(bit, (mask != 0).to(bit.dtype))
    return masked_mean(per_token, mask, denom), frac


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π_θ ‖ π_ref): ``exp(r) − r − 1`` with ``r = log π_ref − log π_θ``.

    Non-negative, zero where the two agree.

    Example:
        >>> k3_kl(torch.tensor([0.0, -1.0]), torch.tensor([0.0, 0.0])).tolist()  # r = 0, 1
        [0.0, 0.7182817459106445]
    """
    r = ref_logp - logp
    return torch.exp(r) - r - 1.0


def opsd_term(
    student_logps: torch.Tensor,
    teacher_logps: torch.Tensor,
    mask: torch.Tensor,
    *,
    beta: float,
    c: float,
    grad: str = "eq4",
) -> torch.Tensor:
    """Eq. 4's distillation term: ``c · mean_seq( (1/|y|) Σ_t g_t δ_t )``.

    ``δ_t = log π_θ̄(y_t | s_tea) − log π_θ(y_t | s_stu)``; ``g_t = σ(β δ_t)``. The teacher's logps
    and the gate carry no gradient, so ``∂term/∂ student_logp_t = −c · g_t / (|y| · B)``:
    minimising it raises the student's probability where the privileged context leads.
    Per-sequence mean over ``mask``, then the batch mean (rows with an empty mask count 0).

    Example:
        >>> s = torch.tensor([[-1.0, -2.0], [-1.0, -3.0]], requires_grad=True)
        >>> t = torch.tensor([[-1.0, -1.0], [-2.0, 0.0]])
        >>> m = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
        >>> term = opsd_term(s, t, m, beta=0.0, c=1.0)  # g = 0.5 everywhere
        >>> term.item()  # row 0: 0.5·(0 + 1)/2 = 0.25; row 1: 0.5·(−1)/1 = −0.5; mean −0.125
        -0.125
        >>> term.backward(); s.grad.tolist() == [[-0.125, -0.125], [-0.25, 0.0]]  # −c·g/(|y|·B); masked: 0
        True

    ``grad="eq4"`` (above) differentiates Eq. 4 as written: ``∂/∂ log π_θ(y_t) = −c·g_t/(|y|·B)``.
    With β = 0 the gate is the constant ½ and the teacher drops out of the gradient, whose
    expectation under on-policy ``y`` is then exactly 0 (``E_y[∇ log π_θ(y)] = 0``).
    ``grad="rkl"`` keeps the same value but gives each token the weight ``g_t·δ_t`` (stop-gradient):
    ``∂/∂ log π_θ(y_t) = −c·g_t·δ_t/(|y|·B)``, the sampled-token estimator of the reverse KL to the
    teacher (OPSD's advantage form, δ_t as a per-token advantage), which distils at any β:

        >>> s.grad = None
        >>> opsd_term(s, t, m, beta=0.0, c=1.0, grad="rkl").backward()  # δ = [[0, 1], [−1, ·]]
        >>> s.grad.tolist() == [[0.0, -0.125], [0.25, 0.0]]  # −c·g·δ/(|y|·B)
        True
    """
    teacher = teacher_logps.detach()
    delta = teacher - student_logps
    gate = torch.sigmoid(beta * delta.detach())
    if grad == "rkl":
        weight = (gate * delta).detach()
        per_token = weight - weight * (student_logps - student_logps.detach())  # value g·δ, grad −g·δ
    elif grad == "eq4":
        per_token = gate * delta
    else:
        raise ValueError(f"unknown OPSD gradient {grad!r} (use 'eq4' or 'rkl')")
    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return c * per_seq.mean()


def opsd_zero_gradient(*, grad: str, beta: float, c: float) -> str | None:
    """Why an OPSD configuration's term has zero expected gradient, or None when it distils.

    Example:
        >>> opsd_zero_gradient(grad="eq4", beta=0.0, c=0.01)  # doctest: +ELLIPSIS
        'opsd_grad eq4 with opsd_beta 0: the gate is a constant 1/2 ...'
        >>> opsd_zero_gradient(grad="rkl", beta=0.0, c=0.01) is None
        True
    """
    if c == 0:
        return "opsd_c is 0: the OPSD term weighs nothing"
    if grad == "eq4" and beta == 0:
        return (
            "opsd_grad eq4 with opsd_beta 0: the gate is a constant 1/2 and the teacher does not enter "
            "the gradient, whose expectation over on-policy samples is exactly 0 (the term distils nothing)"
        )
    return None


def sft_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on target tokens only: ``logits [B, T, V]`` predict ``labels [B, T]``.

    Example:
        >>> logits = torch.zeros(1, 2, 4)  # uniform over 4 tokens: CE = log 4 on each token
        >>> round(sft_loss(logits, torch.tensor([[1, 2]]), torch.tensor([[1.0, 0.0]])).item(), 4)
        1.3863
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return masked_mean(nll, mask)


def token_logps(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log softmax(logits / T)[label]`` per position, in float32: ``[B, T, V], [B, T] -> [B, T]``.

    Example:
        >>> logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0]]])
        >>> [round(x, 4) for x in token_logps(logits, torch.tensor([[0, 1]]))[0].tolist()]
        [-0.6931, -2.1269]
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy ``−Σ_v p_v log p_v`` of each position's distribution (logged, never optimised).

    Example:
        >>> [round(x, 4) for x in token_entropy(torch.zeros(1, 2, 4))[0].tolist()]  # uniform: log 4
        [1.3863, 1.3863]
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def loss_weights(
    mask: torch.Tensor,
    *,
    norm: str,
    total_tokens: float,
    total_rows: float,
    step_tokens: float | None = None,
    updates: int = 1,
) -> torch.Tensor:
    """Per-token weights of one optimizer update (the loss normalisation).

    ``norm="token"``: every trained token of the update weighs ``1 / total_tokens`` (token-mean);
    ``norm="sequence"``: a row's tokens weigh ``1 / (|row| · total_rows)`` (mean of row means).
    ``total_*`` count the whole update (all micro-batches, all ranks), so accumulating
    ``Σ loss_tok · w`` over micro-batches gives exactly that mean, and the weights sum to 1.
    ``norm="trl-dapo"``: TRL's convention (its ``loss_type="dapo"``): every token weighs
    ``updates / step_tokens`` -- the generation batch's trained tokens (the whole step, all ranks)
    divided by the updates per epoch (TRL's ``steps_per_generation``), the same for every update of
    the step; an update's weights sum to its share of the step's tokens × ``updates``, not to 1.
    With one update per step (or ``step_tokens`` None) it is ``token``.

    Example:
        >>> m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
        >>> [round(w, 4) for w in loss_weights(m, norm="token", total_tokens=3, total_rows=2).sum(-1).tolist()]
        [0.6667, 0.3333]
        >>> loss_weights(m, norm="sequence", total_tokens=3, total_rows=2).tolist()
        [[0.25, 0.25, 0.0], [0.5, 0.0, 0.0]]
        >>> # a step of 12 tokens in 2 updates: this update's 3 tokens weigh 2/12, not 1/3
        >>> loss_weights(m, norm="trl-dapo", total_tokens=3, total_rows=2, step_tokens=12, updates=2)[0].tolist()
        [0.1666666716337204, 0.1666666716337204, 0.0]
    """
    if norm == "token" or (norm == "trl-dapo" and step_tokens is None):
        return mask / max(float(total_tokens), 1.0)
    if norm == "trl-dapo":
        assert step_tokens is not None
        return mask * (float(updates) / max(float(step_tokens), 1.0))
    if norm == "sequence":
        per_row = mask.sum(-1, keepdim=True).clamp(min=1.0)
        return mask / per_row / max(float(total_rows), 1.0)
    raise ValueError(f"unknown loss normalisation {norm!r} (use 'token', 'sequence' or 'trl-dapo')")
