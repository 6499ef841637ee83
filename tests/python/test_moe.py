"""A mixture of experts from Python: the config fields, the training loss with its raw
auxiliary losses beside the LM loss, each layer's expert load, capacity dropping in training
only (the decode equals the full forward), the kept routing weights' hook point, and the
active parameter count against Mixtral 8x7B's public configuration."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn


def toy(**kw):
    return nn.Config.preset("mixtral", vocab=11, context=8, d_model=16, heads=4, layers=2,
                            mlp_hidden=24, **kw)


TOKENS = np.array([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 0, 1]])
TARGETS = np.array([[2, 3, 4, 5, 6, -100], [8, 9, 10, 0, 1, 2]])


def raw_losses(model, tokens):
    """aux = E * sum_e f_e * P_e and z = mean_t logsumexp^2 per MoE layer, from the router
    logits at the hook point, averaged over the layers (the docs' definitions)."""
    _, cache = tg.run_with_cache(model, tokens)
    k = model.config.experts_top_k
    aux, z = [], []
    for name in sorted(n for n in cache.keys() if n.endswith("moe.router_logits")):
        logits = cache[name]
        lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
        p = np.exp(logits - lse[:, None])
        top = np.argsort(-p, axis=1, kind="stable")[:, :k]
        f = np.bincount(top.ravel(), minlength=p.shape[1]) / p.shape[0]
        aux.append(p.shape[1] * np.sum(f * p.mean(0)))
        z.append(np.mean(lse ** 2))
    return np.mean(aux), np.mean(z)


@pytest.mark.parametrize("aux_coef", [0.0, 0.5])
def test_the_training_loss_reports_raw_aux_and_z_and_weighs_them_in_the_total(aux_coef):
    model = nn.Transformer(toy(moe_aux_coef=aux_coef, moe_z_coef=0.25), dtype="float64")
    aux, z = raw_losses(model, TOKENS)
    t = model.training_loss(TOKENS, np.array([[2, 3, 4, 5, 6, 7], [8, 9, 10, 0, 1, 2]]))
    assert t["aux"].item() > 0  # watched even at coefficient 0
    assert t["aux"].item() == pytest.approx(aux, rel=1e-12)
    assert t["z"].item() == pytest.approx(z, rel=1e-12)
    assert t["total"].item() == pytest.approx(t["lm"].item() + aux_coef * aux + 0.25 * z, rel=1e-12)
    t["total"].backward()
    router = dict(model.named_parameters())["blocks.0.moe.router.weight"]
    assert np.abs(router.grad).max() > 0


def test_loss_is_the_lm_loss_alone():
    model = nn.Transformer(toy(), dtype="float64")
    assert model.training_loss(TOKENS, TARGETS)["lm"].item() == model.loss(TOKENS, TARGETS).item()


def test_with_a_capacity_the_incremental_decode_equals_the_full_forward():
    model = nn.Transformer(toy(experts=4, moe_capacity=0.25), dtype="float64")
    full = model(TOKENS).numpy()
    cache = model.kv_cache(batch=2)
    with tg.no_grad():
        steps = [model.forward(TOKENS[:, t:t + 1], cache=cache).numpy() for t in range(6)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)
    alone = model(TOKENS[:1]).numpy()
    np.testing.assert_allclose(alone, full[:1], rtol=0, atol=1e-12)  # its batch mate changes nothing


def test_zeroing_the_kept_routing_weights_zeroes_the_experts_output():
    model = nn.Transformer(toy(), dtype="float64")
    _, cache = tg.run_with_cache(model, TOKENS)
    weights = cache["blocks.1.moe.hook_weights"]
    assert weights.shape == (12, 2)
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-12)  # renormalised top 2
    seen = {}

    def record(x, name):
        seen[name] = x.numpy()

    tg.run_with_hooks(model, TOKENS, {"blocks.1.moe.hook_weights": lambda w, n: np.zeros(w.shape),
                                      "blocks.1.resid_mid": record, "blocks.1.resid_post": record})
    assert np.array_equal(seen["blocks.1.resid_post"], seen["blocks.1.resid_mid"])


def test_expert_load_is_k_per_token_and_drops_only_with_a_capacity():
    model = nn.Transformer(toy(experts=4, experts_top_k=2))
    model(TOKENS)
    load = model.expert_load()
    assert [d["layer"] for d in load] == [0, 1]
    for d in load:
        assert d["tokens"] == 12 and len(d["fraction"]) == 4
        assert sum(d["fraction"]) == pytest.approx(2.0)  # each token chose 2 experts
        assert d["capacity"] == 0 and d["dropped_fraction"] == 0
    tight = nn.Transformer(toy(experts=4, experts_top_k=2, moe_capacity=0.25))
    tight(TOKENS)  # evaluation: dropless whatever the capacity
    for d in tight.expert_load():
        assert d["capacity"] == 0 and d["dropped_fraction"] == 0
    tight.training_loss(TOKENS, TARGETS)  # a training forward: over capacity is dropped
    for d in tight.expert_load():
        assert d["capacity"] == 2  # ceil(0.25 * 12 * 2 / 4)
        assert d["dropped_fraction"] >= 16 / 24 - 1e-12  # at most 4 experts x 2 slots of 24 choices kept
    assert nn.Transformer(nn.Config.preset("llama", vocab=11, context=8)).expert_load() == []


def test_mixtral_8x7b_counts_its_public_total_and_active_parameters():
    c = nn.Config.preset("mixtral", vocab=32000, context=4096, d_model=4096, layers=32,
                         heads=32, kv_heads=8, head_dim=128, mlp_hidden=14336)
    assert c.count_parameters() == 46_702_792_704
    assert c.count_active_parameters() == 12_879_925_248
