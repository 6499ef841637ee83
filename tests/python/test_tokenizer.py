"""tapegrad.Tokenizer: byte-level BPE from Python. Expected merges are derived by hand (see
tests/test_bpe_tokenizer.cpp for the C++ side)."""
import os
import random

import numpy as np

import pytest
import tapegrad as tg


def test_tie_goes_to_the_pair_seen_first():
    # "abcbcab": ab and bc both twice, ab first -> 256; then (256, c) = 257 (all pairs once).
    tok = tg.Tokenizer.train("abcbcab", 258, mode="basic")
    assert tok.merges == [((97, 98), 256), ((256, 99), 257)]


def test_str_and_bytes_round_trip():
    tok = tg.Tokenizer.train("the cat and the hat " * 20, 300, mode="regex")
    ids = tok.encode("the hat")
    assert tok.decode(ids) == "the hat"
    assert tok.encode(b"the hat") == ids
    rng = random.Random(1)
    for _ in range(10):
        data = bytes(rng.randrange(256) for _ in range(100))
        assert tok.decode_bytes(tok.encode(data)) == data
    assert tok.decode([255]) == "\ufffd"


def test_special_tokens_save_and_load(tmp_path):
    tok = tg.Tokenizer.train("aaaa", 258, mode="regex", special_tokens={"<|endoftext|>": 257})
    assert tok.special_tokens == {"<|endoftext|>": 257}
    assert tok.encode("aa<|endoftext|>") == [256, 257]
    assert len(tok.encode("<|endoftext|>", allow_special=False)) == 13
    path = str(tmp_path / "t.bpe")
    tok.save(path)
    loaded = tg.Tokenizer.load(path)
    assert loaded.merges == tok.merges
    assert loaded.encode("aa<|endoftext|>") == [256, 257]


def test_bad_input_is_an_error(tmp_path):
    with pytest.raises(TypeError, match="str or bytes"):
        tg.Tokenizer.train(12, 300)
    path = tmp_path / "bad.bpe"
    path.write_text("tapegrad-bpe 9\n")
    with pytest.raises(ValueError, match="line 1"):
        tg.Tokenizer.load(str(path))


def test_a_lone_surrogate_is_a_value_error_naming_its_position():
    tok = tg.Tokenizer.train("the cat the hat", 260)
    with pytest.raises(ValueError, match=r"Tokenizer.encode: text\[3\] is U\+D800, a lone surrogate"):
        tok.encode("abc\ud800def")
    with pytest.raises(ValueError, match=r"Tokenizer.train: text\[0\] is U\+DFFF, a lone surrogate"):
        tg.Tokenizer.train("\udfff" * 3, 260)
    assert tok.encode("\U0001F44D") == list("\U0001F44D".encode())  # a pair-free astral character is fine
    with pytest.raises(ValueError, match=r"Tokenizer.train: special_tokens\[1\]\[2\] is U\+D800, a lone surrogate"):
        tg.Tokenizer.train("the cat the hat", 260, special_tokens=["<|a|>", "<|\ud800|>"])
    with pytest.raises(TypeError, match=r"Tokenizer.train: each special token must be a str or bytes, not int"):
        tg.Tokenizer.train("the cat the hat", 260, special_tokens=[5])


def test_missing_file_and_wrong_ids_name_the_problem(tmp_path):
    missing = tmp_path / "missing.bpe"
    with pytest.raises(FileNotFoundError, match="missing.bpe"):
        tg.Tokenizer.load(str(missing))
    # a file that cannot be written is the OSError its errno names too, not the npz layer's error
    with pytest.raises(FileNotFoundError, match="cannot create the temporary file") as written:
        tg.Tokenizer.train("the cat the hat", 260).save(str(tmp_path / "no" / "tok.bpe"))
    assert not isinstance(written.value, tg.NpzError)
    tok = tg.Tokenizer.train("the cat the hat", 260)
    with pytest.raises(TypeError, match=r"Tokenizer.decode: each of ids must be an integer token id, not str"):
        tok.decode(["a"])
    with pytest.raises(TypeError, match=r"Tokenizer.decode_bytes: ids must be a sequence"):
        tok.decode_bytes("abc")
    with pytest.raises(IndexError, match=r"token id 4294967296 is outside \[0, 260\)"):
        tok.decode([2 ** 32])
    assert tok.decode(np.array(tok.encode("the hat"))) == "the hat"
