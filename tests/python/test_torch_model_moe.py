"""tools/torch_model.py's mixture of experts on hand-built router probabilities: ties go to
the lower expert index, and without renormalisation the weights are the full softmax's
(a softmax over the kept logits alone would differ). Its agreement with tapegrad's layer is
tests/test_to_torch.cpp's."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch_model  # noqa: E402


def test_top_k_ties_go_to_the_lower_index():
    p = torch.tensor([[0.25, 0.25, 0.25, 0.25],
                      [0.1, 0.4, 0.1, 0.4],
                      [0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    weights, chosen = torch_model.top_k_lower_index(p, 2)
    assert chosen.tolist() == [[0, 1], [1, 3], [3, 2]]
    assert weights.tolist() == [[0.25, 0.25], [0.4, 0.4], [0.4, 0.3]]


def moe_block(renorm, top_k):
    c = torch_model.Config(d_model=4, mlp="swiglu", mlp_hidden=6, mlp_bias=False, experts=3,
                           experts_top_k=top_k, moe_renorm=renorm)
    torch.manual_seed(0)
    block = torch_model.MoE(c).double()
    with torch.no_grad():
        block.router.weight.zero_()
        block.router.weight[:, 0] = torch.tensor([2.0, 1.0, 0.0])  # logits 2x0, 1x0, 0 from x0
    return block


def test_weights_are_the_full_softmax_unless_renormalised():
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    p = torch.softmax(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), 0)
    for renorm in (False, True):
        block = moe_block(renorm, 2)
        experts = [block.experts[e](x)[0] for e in range(3)]
        w0, w1 = (p[0], p[1]) if not renorm else (p[0] / (p[0] + p[1]), p[1] / (p[0] + p[1]))
        want = w0 * experts[0] + w1 * experts[1]
        assert torch.allclose(block(x)[0], want, rtol=1e-14, atol=1e-15), renorm
    # the trap: a softmax over the two kept logits is the renormalised weights, not the raw ones
    kept = torch.softmax(torch.tensor([2.0, 1.0], dtype=torch.float64), 0)
    assert not torch.allclose(kept, p[:2])
