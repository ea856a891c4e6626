"""``xtree eval ENV_ID --model M --harness H [...] -o DIR``: argument parsing only; the work is in evaluate."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...errors import ConfigError
from ..run.validate import bounded_tokens, non_negative_float, timeout_seconds, unit_float

DEFAULT_STEP_TIMEOUT_S = 300.0
"""``xtree eval``'s default per-step deadline (a hung env ends its episode as a fault, not the run)."""
DEFAULT_EPISODE_TIMEOUT_S = 3600.0
"""``xtree eval``'s default per-episode deadline."""


def parse_env_args(pairs: list[str] | None, option: str = "--env-arg") -> dict[str, Any]:
    """``["task=boil", "seed=3", "flag=true"]`` -> ``{"task": "boil", "seed": 3, "flag": True}`` (JSON values, else text).

    Example:
        >>> parse_env_args(["task=click-button", "max_steps=5", "data_dir=/d"])
        {'task': 'click-button', 'max_steps': 5, 'data_dir': '/d'}
        >>> parse_env_args(["oops"])
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: --env-arg 'oops' is not KEY=VALUE -- fix: e.g. --env-arg task=click-button
    """
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {pair!r} is not KEY=VALUE", fix=f"e.g. {option} task=click-button")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def read_responses(path: str) -> list[str]:
    """The scripted backend's ``--responses`` file: a non-empty JSON list of strings, else one error."""
    from ...corpus.io import input_problem, loads_strict

    fix = 'write a JSON list of response strings, e.g. ["<action>look around</action>"]'
    problem = input_problem(path, "responses file")
    if problem:
        raise ConfigError(problem, fix=fix)
    try:
        with open(path, "rb") as fh:
            data = loads_strict(fh.read(64 * 1024 * 1024 + 1).decode("utf-8"))
    except (ValueError, OSError) as exc:  # JSONProblem, UnicodeDecodeError
        raise ConfigError(f"cannot read the responses: {exc}", where=path, fix=fix) from None
    if not isinstance(data, list) or not data or not all(isinstance(x, str) for x in data):
        raise ConfigError(
            "the responses file does not hold a non-empty JSON list of strings", where=path, fix=fix
        )
    return data


def _handler(args: argparse.Namespace) -> int:
    from ...envs.needs import check_env

    # every missing extra (the env's, the backend's) and setting (a data folder) in one message, first
    feature, option = f"xtree eval {args.env_id}", "--env-arg data_dir=DIR"
    flags = []
    if args.backend in ("hf", "vllm") and not args.model:
        fix = "pass --model smollm2, tiny-random or a folder"
        flags.append(ConfigError(f"the {args.backend} backend needs --model", fix=fix))
    env_args = parse_env_args(args.env_arg)
    check_env(args.env_id, env_args, backend=args.backend, feature=feature, option=option, also=flags)

    sampling: dict[str, Any] = {"temperature": args.temperature, "top_p": args.top_p}
    # unset: the harness's own (its closing tag, the response length its protocol needs)
    if args.max_new_tokens is not None:
        sampling["max_new_tokens"] = args.max_new_tokens
    if args.stop:
        sampling["stop"] = tuple(args.stop)
    if args.backend in ("scripted", "oracle"):
        sampling = {}
    if args.backend == "scripted":
        if not args.responses:
            raise ConfigError("the scripted backend needs --responses FILE (a JSON list of responses)")
        sampling = {"responses": read_responses(args.responses), "cycle": True}
    elif args.backend in ("hf", "vllm"):
        from ..model.loading import check_device

        check_device(args.device)
    harness_args = parse_env_args(args.harness_arg, "--harness-arg")
    if args.advice:
        harness_args["advice"] = args.advice
    if args.template:
        harness_args["template"] = args.template
    from ...corpus.io import protect_inputs

    files = [v for v in harness_args.values() if isinstance(v, str)]  # advice_corpus=, template=, ...
    with protect_inputs([args.responses, args.advice, args.template, *files]):
        result = _evaluate(args, harness_args, sampling)
    shown = {k: result[k] for k in ("env", "harness", "fold", "backend", "episodes", "success_rate", "score")}
    if "success_rate_rlvmr" in result:
        shown["success_rate_rlvmr"] = result["success_rate_rlvmr"]
    print(json.dumps(shown))
    print(f"wrote {args.output}/results.json and {args.output}/episodes.jsonl")
    return 0


def _evaluate(args: argparse.Namespace, harness_args: dict[str, Any], sampling: dict[str, Any]) -> Any:
    from .evaluate import evaluate

    return evaluate(
        args.env_id,
        model=args.model,
        harness=args.harness,
        fold=args.fold,
        tasks=args.tasks,
        n=args.n,
        backend=args.backend,
        max_steps=args.max_steps,
        env_args=parse_env_args(args.env_arg),
        output_dir=args.output,
        harness_args=harness_args,
        sampling=sampling,
        device=args.device,
        workers=args.workers,
        step_timeout=args.step_timeout,
        episode_timeout=args.episode_timeout,
        seed=args.seed,
        progress=None,
        env_servers=args.env_servers,
    )


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    """Add ``xtree eval``."""
    p = subparsers.add_parser(
        "eval",
        help="play an env's evaluation fold with an LLM policy and write results.json + episodes.jsonl",
        description="Evaluate a policy (model + harness + backend) on a benchmark fold; resumable.",
    )
    p.add_argument(
        "env_id", metavar="ENV_ID", help="e.g. XTree-ScienceWorld-v0, XTree-WebShop-v0, XTree-MiniWoB-v0"
    )
    p.add_argument(
        "--model", help="smollm2, tiny-random or a Hugging Face folder (not needed: scripted, oracle)"
    )
    p.add_argument("--harness", required=True, help="rlvmr, verl-agent, react, browsergym or node")
    p.add_argument(
        "--fold", help="G0 G1 G2 (ScienceWorld, default G0), test (WebShop), all|scripted (MiniWoB)"
    )
    p.add_argument("--tasks", type=int, help="play a seeded subset of N tasks of the fold")
    p.add_argument("--n", type=int, default=1, help="episodes per task (a group of same-seed env copies)")
    p.add_argument("--backend", default="hf", help="scripted, oracle, hf or vllm (default hf)")
    p.add_argument(
        "--max-steps", type=int, help="env steps per episode (default: the harness's protocol cap)"
    )
    p.add_argument(
        "--env-arg", action="append", metavar="KEY=VALUE", help="env constructor argument (repeatable)"
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder for results.json and episodes.jsonl"
    )
    p.add_argument(
        "--harness-arg", action="append", metavar="KEY=VALUE", help="harness argument (repeatable)"
    )
    p.add_argument("--advice", metavar="TREE", help="add the in-context advice hint from this tree file")
    p.add_argument("--template", metavar="FILE", help="a wording file replacing the harness's prompt text")
    p.add_argument("--responses", metavar="FILE", help="scripted backend: a JSON list of responses (cycled)")
    p.add_argument("--temperature", type=non_negative_float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=unit_float, default=1.0)
    p.add_argument(
        "--max-new-tokens",
        type=bounded_tokens,
        default=None,
        help="response tokens per turn at most (default: the harness's, e.g. 256 for rlvmr)",
    )
    p.add_argument(
        "--stop",
        action="append",
        metavar="TEXT",
        help="stop string (repeatable; default: the harness's closing tag, e.g. </action>)",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the task subset and the sampling")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--workers", type=int, default=0, help="env subprocesses (0 = in-process)")
    p.add_argument(
        "--env-servers",
        metavar="URL[,URL...]",
        help="play each episode on one of these `xtree serve` servers (least loaded first) instead of a "
        "local env; a token goes in $XTREE_SERVE_TOKEN; with --workers K, K episodes at once as locally",
    )
    p.add_argument(
        "--step-timeout",
        type=timeout_seconds,
        default=DEFAULT_STEP_TIMEOUT_S,
        help=f"seconds an env step may take before the episode is cut (default {DEFAULT_STEP_TIMEOUT_S:g}; 0 = none)",
    )
    p.add_argument(
        "--episode-timeout",
        type=timeout_seconds,
        default=DEFAULT_EPISODE_TIMEOUT_S,
        help=f"seconds an episode may take (default {DEFAULT_EPISODE_TIMEOUT_S:g}; 0 = none)",
    )
    p.set_defaults(func=_handler)
