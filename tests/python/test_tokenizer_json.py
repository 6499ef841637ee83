"""tokenizer.json in and out, compared with the Hugging Face `tokenizers` library itself:
tokenizers trained here (GPT-2 and Llama 3 style) encode the same ids in tapegrad, and
tapegrad's own tokenizers, saved with save_pretrained, encode the same ids in `tokenizers`.
Skipped without `tokenizers` unless TAPEGRAD_REQUIRE_HF=1."""
import json
import random
import shutil
import subprocess

import pytest
import tapegrad as tg
from conftest import require_module

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
GPT2_SPECIALS = ["<|endoftext|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]


@pytest.fixture(scope="module")
def hf():
    return require_module("tokenizers")


@pytest.fixture(scope="module")
def kjv():
    """Debian's bible-kjv (scripts/kjv-corpus.sh), about 4.3 MB."""
    if shutil.which("bible") is None:
        pytest.skip("no bible program (bible-kjv)")
    return subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, check=True,
                          text=True).stdout


def stress_text(specials, seed=7, pieces=6000):
    """Random UTF-8 with what splits and merges trip on, special tokens embedded."""
    rng = random.Random(seed)
    words = ["the", "LORD", "God's", "they'LL", "we'VE", "I'm", "don't", "'s", "'S", "''",
             "café", "naïve", "e\u0301", "a\u0308\u0301", "中文", "字符", "漢字", "日本語",
             "\U0001F469\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\U0001F44D\U0001F3FD",
             "\U0001F1EB\U0001F1F7", "\u2764\uFE0F", "Привет", "مرحبا", "नमस्ते", "ⅫⅣ", "½",
             "1", "12", "123", "1234", "12345678901", "3.14", "1,000", "٣٤٥",
             "...", "!!", "?!", "--", "(", ")", "\"", "#$%&", "@", "~", "_x_", "\\",
             "\u00A0", "\u3000", "\u2028", "\u0085", "\u200B", "\uFEFF", "\u180E"]
    separators = [" ", " ", " ", "  ", "      ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ",
                  "\x00", "\x01", "\x1b", "\x7f", "", ""]
    out = []
    for _ in range(pieces):
        roll = rng.random()
        if roll < 0.02:
            out.append(rng.choice(specials))
        elif roll < 0.04:
            out.append(chr(rng.randrange(0x20)))
        else:
            out.append(rng.choice(words))
        out.append(rng.choice(separators))
    return "".join(out)


def train_hf(hf, corpus, pre_tokenizer, specials, ignore_merges=False):
    tok = hf.Tokenizer(hf.models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = hf.decoders.ByteLevel()
    trainer = hf.trainers.BpeTrainer(vocab_size=2000, special_tokens=specials, show_progress=False,
                                     initial_alphabet=hf.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([corpus[i:i + 100000] for i in range(0, len(corpus), 100000)], trainer)
    return tok


@pytest.fixture(scope="module")
def gpt2_style(hf, kjv):
    tok = train_hf(hf, kjv[:1000000], hf.pre_tokenizers.ByteLevel(add_prefix_space=False), GPT2_SPECIALS)
    tok.post_processor = hf.processors.ByteLevel(trim_offsets=False)
    tok.add_tokens(["LORD God"])  # a normalized, non-special added token
    return tok


@pytest.fixture(scope="module")
def llama3_style(hf, kjv):
    split = hf.pre_tokenizers.Split(hf.Regex(LLAMA3_PATTERN), behavior="isolated", invert=False)
    pre = hf.pre_tokenizers.Sequence([split, hf.pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                          use_regex=False)])
    trained = train_hf(hf, kjv[:1000000], pre, LLAMA3_SPECIALS, ignore_merges=True)
    # Llama 3's vocabulary (from tiktoken) holds words its merges do not make in one piece;
    # a trained one does not, so a few are added: only ignore_merges emits them whole.
    file = json.loads(trained.to_str())
    vocab = file["model"]["vocab"]
    for word in ["Привет", " Привет", "\tПривет", "naïve", " naïve", "中文", " 中文", "\t中文"]:
        vocab.setdefault(byte_level(word), len(vocab))
    tok = hf.Tokenizer.from_str(json.dumps(file))
    tok.add_special_tokens(["<|reserved_special_token_0|>"])  # an id after the vocabulary
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = hf.processors.Sequence([
        hf.processors.ByteLevel(trim_offsets=False),
        hf.processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                         pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                         special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def byte_level(text):
    """GPT-2's bytes_to_unicode spelling of the text's UTF-8 bytes."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    char = {b: chr(b if b in printable else next(extra)) for b in range(256)}
    return "".join(char[b] for b in text.encode())


def saved(tok, path):
    tok.save(str(path))
    return path


def assert_same_ids(expected, actual, text):
    if expected != actual:
        first = next(i for i, (e, a) in enumerate(zip(expected + [None], actual + [None])) if e != a)
        pytest.fail(f"ids differ at {first} of {len(expected)}: tokenizers {expected[first:first + 5]}, "
                    f"tapegrad {actual[first:first + 5]}; text around: {text[:80]!r}")


@pytest.mark.parametrize("style", ["gpt2_style", "llama3_style"])
def test_hf_tokenizer_encodes_the_same_ids(style, request, tmp_path, kjv):
    hf_tok = request.getfixturevalue(style)
    path = saved(hf_tok, tmp_path / "tokenizer.json")
    tok = tg.Tokenizer.from_pretrained(str(tmp_path))
    assert tok.vocab_size == hf_tok.get_vocab_size()
    specials = GPT2_SPECIALS if style == "gpt2_style" else LLAMA3_SPECIALS + ["<|reserved_special_token_0|>"]
    for text in [kjv, stress_text(specials), "", " ", "LORD God", "\n"]:
        assert_same_ids(hf_tok.encode(text).ids, tok.encode(text), text)
        assert_same_ids(hf_tok.encode(text, add_special_tokens=False).ids,
                        tok.encode(text, add_special_tokens=False), text)
    text = stress_text(specials, seed=8)
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    # A path to the file itself reads the same tokenizer.
    assert tg.Tokenizer.from_pretrained(str(path)).encode(text) == tok.encode(text)


def test_the_comparison_catches_ignore_merges_and_the_pattern(llama3_style, tmp_path):
    """Getting a Llama 3 detail wrong changes the ids on the stress text, so the test above
    would catch it."""
    text = stress_text(LLAMA3_SPECIALS)
    expected = llama3_style.encode(text).ids
    file = json.loads(llama3_style.to_str())
    assert file["model"]["ignore_merges"] is True
    file["model"]["ignore_merges"] = False
    (tmp_path / "no_ignore.json").write_text(json.dumps(file))
    assert tg.Tokenizer.from_pretrained(str(tmp_path / "no_ignore.json")).encode(text) != expected
    file = json.loads(llama3_style.to_str())
    file["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = GPT2_PATTERN
    (tmp_path / "gpt2_split.json").write_text(json.dumps(file))
    assert tg.Tokenizer.from_pretrained(str(tmp_path / "gpt2_split.json")).encode(text) != expected


@pytest.mark.parametrize("mode", ["regex", "basic"])
def test_tapegrad_tokenizer_saved_encodes_the_same_in_tokenizers(hf, kjv, mode, tmp_path):
    specials = ["<|endoftext|>", "<|fim|>"]
    train = kjv[:400000] if mode == "regex" else kjv[:60000]
    tok = tg.Tokenizer.train(train, 1000 if mode == "regex" else 400, mode=mode, special_tokens=specials)
    tok.save_pretrained(str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    hf_tok = hf.Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    texts = [kjv[1000000:1000000 + (300000 if mode == "regex" else 30000)], stress_text(specials, pieces=3000)]
    for text in texts:
        assert_same_ids(hf_tok.encode(text).ids, tok.encode(text), text)
    # And read back, it is the same minbpe tokenizer.
    back = tg.Tokenizer.from_pretrained(str(tmp_path / "out"))
    assert back.merges == tok.merges and back.special_tokens == tok.special_tokens


def test_transformers_autotokenizer_loads_a_saved_folder(kjv, tmp_path, monkeypatch):
    transformers = require_module("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = tg.Tokenizer.train(kjv[:200000], 600, mode="regex", special_tokens=["<|endoftext|>"])
    tok.save_pretrained(str(tmp_path))
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    text = kjv[500000:520000] + "<|endoftext|>"
    assert auto(text)["input_ids"] == tok.encode(text)


def test_refusals_name_the_field(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "ByteLevel"},
         "model": {"type": "BPE", "vocab": {}, "merges": []}}))
    with pytest.raises(ValueError, match="tokenizer.json: normalizer: normalizer NFC is not supported"):
        tg.Tokenizer.from_pretrained(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="nothing"):
        tg.Tokenizer.from_pretrained(str(tmp_path / "nothing"))
    # 256 = ab, 257 = abc, 258 = bc, 259 = a + bc: abc again. Nothing written, not even the folder.
    (tmp_path / "twice.bpe").write_text("tapegrad-bpe 1\nmode basic\npattern \nspecials 0\n"
                                        "merges 4\n97 98\n256 99\n98 99\n97 258\n")
    tok = tg.Tokenizer.load(str(tmp_path / "twice.bpe"))
    with pytest.raises(ValueError, match="tokens 257 and 259 have the same bytes"):
        tok.save_pretrained(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_add_prefix_space_before_each_piece_between_added_tokens(hf, tmp_path):
    tok = hf.Tokenizer(hf.models.BPE())
    tok.pre_tokenizer = hf.pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)
    trainer = hf.trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>"], show_progress=False,
                                     initial_alphabet=hf.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["ab ab abc the the cat"] * 10, trainer)
    saved(tok, tmp_path / "tokenizer.json")
    ours = tg.Tokenizer.from_pretrained(str(tmp_path))
    for text in ["ab c", " ab", "ab<s>ab", "<s>", "", "ab<s> ab", "the cat<s>the", stress_text(["<s>"], pieces=500)]:
        assert_same_ids(tok.encode(text).ids, ours.encode(text), text)


PREFIX_SPACE_TEXTS = ["Hello world", " Hello world", "  two spaces", "\tTab first", "\nnewline first",
                      "", " ", "café naïve 中文 \U0001F44D", " émigré", "<s>Hello</s>", "Hi<s> there",
                      "the cat sat", "123 456", "line one\nline two", "ends with space "]


@pytest.mark.parametrize("add_prefix_space", [True, False])
def test_autotokenizer_reads_a_saved_folder_back_as_saved(hf, tmp_path, monkeypatch, add_prefix_space):
    """tokenizer_config.json carries what transformers reads back: AutoTokenizer encodes and
    decodes as tapegrad and `tokenizers` do, and knows the BOS/EOS the template adds and the
    model_max_length given."""
    transformers = require_module("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = hf.Tokenizer(hf.models.BPE())
    tok.pre_tokenizer = hf.pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = hf.decoders.ByteLevel()
    trainer = hf.trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"], show_progress=False,
                                     initial_alphabet=hf.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["Hello world, the cat sat on the mat. café naïve"] * 20, trainer)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = hf.processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
    (tmp_path / "in").mkdir()
    saved(tok, tmp_path / "in" / "tokenizer.json")
    ours = tg.Tokenizer.from_pretrained(str(tmp_path / "in"))
    ours.save_pretrained(str(tmp_path / "out"), model_max_length=64)
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "out"), local_files_only=True)
    for text in PREFIX_SPACE_TEXTS:
        ids = ours.encode(text)
        assert_same_ids(tok.encode(text).ids, ids, text)
        assert_same_ids(auto(text)["input_ids"], ids, text)
        assert auto.decode(ids) == ours.decode(ids), text
        assert auto.decode(ids, skip_special_tokens=True) == ours.decode(ids, skip_special_tokens=True), text
    assert (auto.bos_token, auto.eos_token) == ("<s>", "</s>")
    assert auto.model_max_length == 64
