#!/usr/bin/python3
"""What a user who moved to PyTorch does next: load the file tools/to_torch.py wrote, train
the module a few AdamW steps in plain torch, save it the same way. Used by
tests/test_to_torch.cpp to show that weights changed in torch come back into tapegrad.

  torch_keep_training.py model.pt trained.pt [steps]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_model import Config, Transformer  # noqa: E402


def main(src, dst, steps):
    saved = torch.load(src)
    model = Transformer(Config(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    c = model.config
    g = torch.Generator().manual_seed(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        seq = torch.randint(0, c.vocab, (8, c.context + 1), generator=g)
        loss = model.loss(seq[:, :-1], seq[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    saved["state_dict"] = model.state_dict()
    torch.save(saved, dst)
    print(f"trained {steps} steps, last loss {loss.item():.6f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
