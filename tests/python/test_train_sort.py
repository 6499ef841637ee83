"""A dozen-line Python training loop on the sort task reaches the C++ trainer's held-out
accuracy with the same seed and options: same batches, same initialisation, same steps."""
import json
import subprocess

import numpy as np
import tapegrad as tg
from tapegrad import nn, tasks

STEPS, SEED, WARMUP = 200, 1, 40


def train_in_python(steps, seed, batch=64, lr=3e-3, min_lr=3e-4, warmup=WARMUP, clip=1.0):
    task = tasks.SequenceTask("sort")
    model = nn.Transformer(nn.Config(vocab=task.vocab_size, context=task.context, seed=seed))
    params = dict(model.named_parameters())
    decayed = [p for p in params.values() if p.ndim >= 2]
    plain = [p for p in params.values() if p.ndim < 2]
    opts = [nn.AdamW(decayed, lr, (0.9, 0.99), 1e-8, 0.01), nn.AdamW(plain, lr, (0.9, 0.99), 1e-8, 0.0)]
    schedule, data = nn.WarmupCosine(lr, min_lr, warmup, steps), tg.Generator(tasks.data_seed(seed))
    for step in range(steps):
        for o in opts:
            o.lr = schedule(step)
        b = task.train_batch(batch, data, step)
        model.loss(b.tokens, b.targets).backward()
        nn.clip_grad_norm(model.parameters(), clip)
        for o in opts:
            o.step()
        model.zero_grad()
    return tasks.evaluate(model, tasks.held_out(task))


def test_python_loop_matches_the_cpp_trainer(build_dir, tmp_path):
    trainer = build_dir / "examples" / "train_tiny_transformer"
    subprocess.run([str(trainer), "--task", "sort", "--steps", str(STEPS), "--seed", str(SEED),
                    "--warmup", str(WARMUP), "--batch", "64", "--lr", "3e-3", "--min-lr", "3e-4",
                    "--skip-gradcheck", "--quiet", "--out", str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    cpp = json.loads((tmp_path / "metrics.json").read_text())
    py = train_in_python(STEPS, SEED)
    assert py.sequences == cpp["eval_sequences"] == 1000
    assert py.exact_accuracy == cpp["eval_exact_accuracy"]
    assert abs(py.loss - cpp["eval_loss"]) < 1e-5
    assert py.exact_accuracy > 0.2  # it learned something: the comparison is not of two zeros
