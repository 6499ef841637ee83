"""The built-in training tasks of tasks/ (sort, reverse, recall) and their held-out
evaluation, with the C++ trainer's seeds, so a Python loop sees the trainer's batches."""
from ._tapegrad.tasks import (IGNORE, Batch, EvalResult, Example, SequenceTask,
                              batch_examples, evaluate)

# The trainer's held-out set does not depend on --seed (examples/train_tiny_transformer.cpp).
EVAL_SEED = 0x5EED0FE7A1
EVAL_SIZE = 1000
EVAL_BATCH = 250


def data_seed(seed):
    """The seed of the trainer's training-batch stream for --seed `seed`."""
    return (seed * 0x9E3779B97F4A7C15 + 1) % (1 << 64)


def held_out(task, size=EVAL_SIZE, batch=EVAL_BATCH):
    """The trainer's held-out batches for a sequence task."""
    from ._tapegrad import Generator
    gen = Generator(EVAL_SEED)
    examples = [task.sample_eval(gen) for _ in range(size)]
    return batch_examples(task, examples, batch)


__all__ = ["IGNORE", "Batch", "EvalResult", "Example", "SequenceTask", "batch_examples",
           "evaluate", "held_out", "data_seed", "EVAL_SEED"]
