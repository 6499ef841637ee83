"""What the functional peers (JAX, MLX) write by hand, in any numpy-like namespace `xp`:
AdamW with torch.optim.AdamW's semantics (bias-corrected moments, decoupled weight decay
on every parameter, as tapegrad's AdamW), and the RoPE tables."""


def adamw(xp, w, params, grads, m, v, t):
    """One AdamW update of the dicts params/m/v with grads at step t (1-based)."""
    b1, b2, lr, eps, wd = w["beta1"], w["beta2"], w["lr"], w["eps"], w["weight_decay"]
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new_p, new_m, new_v = {}, {}, {}
    for k, p in params.items():
        g = grads[k]
        mk = b1 * m[k] + (1 - b1) * g
        vk = b2 * v[k] + (1 - b2) * g * g
        p = p * (1 - lr * wd)
        new_p[k] = p - lr * (mk / c1) / (xp.sqrt(vk / c2) + eps)
        new_m[k], new_v[k] = mk, vk
    return new_p, new_m, new_v


def rope_tables(np, w):
    """cos, sin (context, head_dim) of rotate_half RoPE, computed in double."""
    dh = w["d_model"] // w["heads"]
    inv = w["rope_theta"] ** (-np.arange(0, dh, 2, dtype=np.float64) / dh)
    ang = np.outer(np.arange(w["context"], dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], -1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
