"""The model_types the docs name are the ones the library reads and writes: README.md,
docs/INTEROP.md and docs/PYTHON.md list exactly nn.hf_model_types(), and so does
from_pretrained's docstring; the presets the docs name are nn.Config.preset_names()."""
import re

from conftest import ROOT
from tapegrad import nn


def listed_model_types(path):
    """The names after `model_type` (README's table row, PYTHON.md's from_pretrained)."""
    text = re.sub(r"\s+", " ", (ROOT / path).read_text(encoding="utf-8")).replace("**", "")
    lists = re.findall(r"model_type`? ((?:\w+, )+\w+,? (?:and|or) \w+)", text)
    assert lists, f"{path} names no list of model_types"
    return [sorted(re.split(r",? (?:and|or) |, ", found)) for found in lists]


def test_the_docs_name_exactly_the_supported_model_types():
    supported = sorted(nn.hf_model_types())
    assert {"gemma2", "bloom"} <= set(supported)
    for path in ("README.md", "docs/INTEROP.md", "docs/PYTHON.md"):
        for found in listed_model_types(path):
            assert found == supported, path


def test_from_pretrained_names_every_supported_model_type():
    doc = re.sub(r"\s+", " ", nn.Transformer.from_pretrained.__doc__)
    for model_type in nn.hf_model_types():
        assert f" {model_type}" in doc, model_type


def test_the_docs_name_exactly_the_presets():
    """README's and docs/TRAINING.md's --arch lists: "`--arch gpt2`, the default, `llama`, ...
    or `bloom`"."""
    for path in ("README.md", "docs/TRAINING.md"):
        text = re.sub(r"\s+", " ", (ROOT / path).read_text(encoding="utf-8"))
        found = re.findall(r"`--arch (\w+)`, the default, ((?:`\w+`, )*`\w+`,? or `\w+`)", text)
        assert found, f"{path} names no --arch list"
        for first, rest in found:
            names = [first] + re.findall(r"`(\w+)`", rest)
            assert sorted(names) == sorted(nn.Config.preset_names()), path
