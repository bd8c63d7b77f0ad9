"""The real thing: transformers registers its model outputs with torch only.

A tiny GPT-2 and BERT are built from a config (no weights are downloaded);
their outputs are ModelOutput subclasses that transformers registers with
`torch.utils._pytree`. Without install(), `import cpytree as pytree` must
give torch's answers on them (issue: drop-in parity; _torch/_follow.py).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.utils._pytree as tp  # noqa: E402

import cpytree  # noqa: E402

pytestmark = pytest.mark.torch


def _gpt2_output():
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=16,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        return model(torch.tensor([[1, 2, 3]]), output_hidden_states=True, output_attentions=True)


def _bert_output():
    config = transformers.BertConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16, intermediate_size=32,
        vocab_size=50, max_position_embeddings=16,
    )  # fmt: skip
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        return model(torch.tensor([[1, 2, 3]]), output_hidden_states=True)


@pytest.fixture(scope="module", params=["gpt2", "bert"])
def output(request):
    torch.manual_seed(0)
    return {"gpt2": _gpt2_output, "bert": _bert_output}[request.param]()


def test_outputs_are_registered_with_torch_only(output):
    cls = type(output)
    assert cls in tp.SUPPORTED_NODES
    assert cpytree.SUPPORTED_NODES[cls].flatten_fn is tp.SUPPORTED_NODES[cls].flatten_fn
    assert not cpytree.is_installed()


def test_flatten_unflatten_map_and_paths_equal_torch(output):
    leaves, spec = cpytree.tree_flatten(output)
    t_leaves, t_spec = tp.tree_flatten(output)
    assert len(leaves) == len(t_leaves) > 2
    assert all(a is b for a, b in zip(leaves, t_leaves, strict=True))
    assert repr(spec) == repr(t_spec)
    rebuilt = cpytree.tree_unflatten(leaves, spec)
    assert type(rebuilt) is type(output) and list(rebuilt.keys()) == list(output.keys())
    assert tp.tree_flatten(rebuilt)[1] == t_spec
    doubled = cpytree.tree_map(lambda t: t * 2 if isinstance(t, torch.Tensor) else t, output)
    assert type(doubled) is type(output)
    for got, want in zip(tp.tree_leaves(doubled), t_leaves, strict=True):
        if isinstance(want, torch.Tensor):
            assert torch.equal(got, want * 2)
    paths = [cpytree.keystr(p) for p, _ in cpytree.tree_flatten_with_path(output)[0]]
    assert paths == [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(output)[0]]
    assert paths[0] in ("['logits']", "['last_hidden_state']")
