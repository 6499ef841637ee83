"""What a checkpoint saved from Python carries and what loading it refuses, as the C++
trainer does: the task the model was trained on (so that generate reads a task prompt and
prints its answer), and no parameter holding NaN or Inf unless asked for."""
import subprocess

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn, tasks

TASK_KEY = "__config__.train_task"  # the trainer's entry, read by generate


def sort_model():
    task = tasks.SequenceTask("sort")
    return task, nn.Transformer(nn.Config(vocab=task.vocab_size, context=task.context,
                                          d_model=16, heads=2, layers=1))


def task_name_in(path):
    with np.load(path) as f:
        return "".join(chr(c) for c in f[TASK_KEY]) if TASK_KEY in f.files else None


def test_save_records_the_task_given_as_object_or_name(tmp_path):
    task, model = sort_model()
    model.save(str(tmp_path / "object.npz"), task=task)
    nn.save_checkpoint(str(tmp_path / "name.npz"), model, task="sort")
    model.save(str(tmp_path / "none.npz"))
    assert task_name_in(tmp_path / "object.npz") == "sort"
    assert task_name_in(tmp_path / "name.npz") == "sort"
    assert task_name_in(tmp_path / "none.npz") is None
    # the entry is under the config's prefix: the checkpoint still loads as a model
    back = nn.load_checkpoint(str(tmp_path / "object.npz"))
    assert back.config == model.config


def test_save_refuses_a_task_it_cannot_record(tmp_path):
    _, model = sort_model()
    with pytest.raises(tg.ShapeError, match="unknown task 'sorting'"):
        model.save(str(tmp_path / "m.npz"), task="sorting")
    with pytest.raises(TypeError, match="save: task must be .*, not int"):
        model.save(str(tmp_path / "m.npz"), task=3)
    # a task the model cannot take: generate would slide its prompts through the model
    reverse = tasks.SequenceTask("reverse")
    assert (reverse.vocab_size, reverse.context) != (model.config.vocab, model.config.context)
    for other in ("reverse", "recall", tasks.SequenceTask("recall")):
        with pytest.raises(tg.ShapeError, match="the task '.*' needs vocab .* the model has 11 and 16"):
            model.save(str(tmp_path / "m.npz"), task=other)
    assert not (tmp_path / "m.npz").exists()


def test_generate_reads_the_task_of_a_python_checkpoint(build_dir, tmp_path):
    task, model = sort_model()
    model.save(str(tmp_path / "m.npz"), task=task)
    generate = [str(build_dir / "examples" / "generate"), "--model", str(tmp_path / "m.npz")]
    # a sort prompt is 8 symbols: only a model that knows its task can say so
    short = subprocess.run(generate + ["--prompt", "5 8 6 4 9 5 2"], capture_output=True, text=True)
    assert short.returncode == 2 and "sort task needs 8 input tokens" in short.stderr
    full = subprocess.run(generate + ["--prompt", "5 8 6 4 9 5 2 9"], capture_output=True, text=True)
    assert full.returncode == 0, full.stderr
    assert f"{task.answer_len} new tokens" in full.stderr


def nan_checkpoint(tmp_path):
    _, model = sort_model()
    good = str(tmp_path / "good.npz")
    model.save(good)
    with np.load(good) as f:
        entries = dict(f)
    entries["blocks.0.attn.Wq"][1, 2] = np.nan
    bad = str(tmp_path / "nan.npz")
    np.savez(bad, **entries)
    return model, bad


def test_load_refuses_nonfinite_weights_naming_the_parameter(tmp_path):
    model, bad = nan_checkpoint(tmp_path)
    Wq = dict(model.named_parameters())["blocks.0.attn.Wq"]
    before = Wq.numpy()
    message = r"parameter 'blocks\.0\.attn\.Wq' \(16,16\) holds nan at element 18 \(allow_nonfinite=True"
    with pytest.raises(tg.CheckpointError, match=message):
        nn.load_checkpoint(bad)
    with pytest.raises(tg.CheckpointError, match=message):
        nn.load_checkpoint(bad, dtype="float64")
    with pytest.raises(tg.CheckpointError, match=message):
        model.load(bad)
    np.testing.assert_array_equal(Wq.numpy(), before)  # nothing was written


def test_allow_nonfinite_loads_them_anyway(tmp_path):
    model, bad = nan_checkpoint(tmp_path)
    loaded = nn.load_checkpoint(bad, allow_nonfinite=True)
    assert np.isnan(dict(loaded.named_parameters())["blocks.0.attn.Wq"].numpy()[1, 2])
    model.load(bad, allow_nonfinite=True)
    assert np.isnan(dict(model.named_parameters())["blocks.0.attn.Wq"].numpy()[1, 2])


def nan_folder(tmp_path):
    _, model = sort_model()
    folder = tmp_path / "hf"
    model.save_pretrained(folder)
    weights = str(folder / "model.safetensors")
    tensors = tg.read_safetensors(weights)
    tensors["transformer.h.0.mlp.c_fc.weight"][0, 3] = np.inf
    tg.write_safetensors(weights, tensors)
    return folder


def test_from_pretrained_refuses_nonfinite_weights_naming_the_tensor(tmp_path):
    folder = nan_folder(tmp_path)
    message = (r"model\.safetensors: tensor 'transformer\.h\.0\.mlp\.c_fc\.weight' \(16, 64\) "
               r"holds inf at element 3 \(allow_nonfinite loads it anyway\)")
    for dtype in ("float32", "float64"):
        with pytest.raises(tg.CheckpointError, match=message):
            nn.Transformer.from_pretrained(folder, dtype=dtype)
    loaded = nn.Transformer.from_pretrained(folder, allow_nonfinite=True)
    assert dict(loaded.named_parameters())["blocks.0.mlp.fc.weight"].numpy()[0, 3] == np.inf
