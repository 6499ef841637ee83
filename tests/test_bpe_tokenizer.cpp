// text/: the byte-level BPE tokenizer. Expected merges and splits are derived by hand in the
// comments; the fast trainer is compared with a straightforward one written here.
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "text/bpe_tokenizer.hpp"
#include "text/utf8.hpp"

using namespace tapegrad::text;

namespace {

std::vector<std::string> split_gpt4(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view chunk : RegexSplitter(std::string(gpt4_split_pattern)).split(text))
    out.emplace_back(chunk);
  return out;
}

using Pair = std::pair<std::int32_t, std::int32_t>;
std::vector<Pair> merge_pairs(const BpeTokenizer& tokenizer) {
  std::vector<Pair> pairs;
  for (const BpeMerge& merge : tokenizer.merges()) pairs.emplace_back(merge.first, merge.second);
  return pairs;
}

// minbpe's algorithm as plainly as possible: recount every pair over every chunk (in text
// order, duplicates included) each step; the first pair seen among the most frequent wins.
std::vector<Pair> reference_merges(const std::vector<std::string_view>& chunks, int merge_count) {
  std::vector<std::vector<std::int32_t>> sequences;
  for (std::string_view chunk : chunks) {
    sequences.emplace_back();
    for (char c : chunk) sequences.back().push_back(static_cast<unsigned char>(c));
  }
  std::vector<Pair> merges;
  for (int m = 0; m < merge_count; ++m) {
    std::map<Pair, std::int64_t> counts;
    std::vector<Pair> first_seen_order;
    for (const auto& seq : sequences)
      for (std::size_t i = 0; i + 1 < seq.size(); ++i) {
        Pair pair{seq[i], seq[i + 1]};
        if (counts[pair]++ == 0) first_seen_order.push_back(pair);
      }
    if (first_seen_order.empty()) break;
    Pair best = first_seen_order[0];
    for (const Pair& pair : first_seen_order)
      if (counts[pair] > counts[best]) best = pair;
    merges.push_back(best);
    std::int32_t id = 256 + m;
    for (auto& seq : sequences) {
      std::vector<std::int32_t> merged;
      for (std::size_t i = 0; i < seq.size(); ++i) {
        if (i + 1 < seq.size() && Pair{seq[i], seq[i + 1]} == best) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(seq[i]);
        }
      }
      seq = std::move(merged);
    }
  }
  return merges;
}

// minbpe's encode as plainly as possible: while some adjacent pair has a merge, merge every
// occurrence of the lowest-ranked one, left to right.
std::vector<std::int32_t> reference_encode(const BpeTokenizer& tokenizer, std::string_view text) {
  std::map<Pair, std::int32_t> rank;
  for (std::size_t r = 0; r < tokenizer.merges().size(); ++r)
    rank[{tokenizer.merges()[r].first, tokenizer.merges()[r].second}] = std::int32_t(r);
  std::vector<std::int32_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  for (;;) {
    std::int32_t best = -1;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i)
      if (auto found = rank.find({ids[i], ids[i + 1]}); found != rank.end())
        if (best < 0 || found->second < best) best = found->second;
    if (best < 0) return ids;
    const BpeMerge& merge = tokenizer.merges()[best];
    std::vector<std::int32_t> merged;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i + 1 < ids.size() && ids[i] == merge.first && ids[i + 1] == merge.second) {
        merged.push_back(merge.id);
        ++i;
      } else {
        merged.push_back(ids[i]);
      }
    }
    ids = std::move(merged);
  }
}

// A few KB of mixed text: English words, contractions, numbers, punctuation, Cyrillic, CJK,
// spaces and newlines, in an order fixed by the seed.
std::string varied_text(unsigned seed, std::size_t words) {
  const std::vector<std::string> vocabulary = {
      "the", "The", "and", "of", "LORD", "said", "unto", "him", "it's", "we'll", "they're",
      "DON'T", "I've", "12", "2026", "123456", "7", "!!", "...", ",", ";", "?",
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",  // Привет
      "\xd0\xbc\xd0\xb8\xd1\x80",                          // мир
      "\xe4\xbd\xa0\xe5\xa5\xbd",                          // 你好
      "\xe4\xb8\x96\xe7\x95\x8c",                          // 世界
      "  ", "\n", "\n\n", "\t", "aaaa", "abab", "banana"};
  std::mt19937 random(seed);
  std::string text;
  for (std::size_t w = 0; w < words; ++w) {
    text += vocabulary[random() % vocabulary.size()];
    if (random() % 3 != 0) text += ' ';
  }
  return text;
}

std::string random_bytes(std::mt19937& random, std::size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = char(random() % 256);
  return bytes;
}

}  // namespace

TEST_CASE("bpe: a tie goes to the pair that occurs first", "[bpe]") {
  // "abcbcab": ab x2 (first at 0), bc x2 (first at 1), cb, ca -> ab = 256.
  // [256 c b c 256]: four pairs, one each -> (256, c) = 257; [257 b c 256] -> (257, b) = 258;
  // [258 c 256] -> (258, c) = 259; [259 256] -> (259, 256) = 260; then no pairs are left.
  BpeTokenizer tokenizer = BpeTokenizer::train("abcbcab", 256 + 10, BpeMode::basic);
  std::vector<Pair> expected = {{'a', 'b'}, {256, 'c'}, {257, 'b'}, {258, 'c'}, {259, 256}};
  CHECK(merge_pairs(tokenizer) == expected);
  CHECK(tokenizer.encode("abcbcab") == std::vector<std::int32_t>{260});
  CHECK(tokenizer.vocab_size() == 261);
}

TEST_CASE("bpe: pairs never cross chunks in regex mode, and chunks count with multiplicity", "[bpe]") {
  // basic "ab ab": ab x2 -> 256; [256 ' ' 256]: (256, ' ') first -> 257.
  CHECK(merge_pairs(BpeTokenizer::train("ab ab", 258, BpeMode::basic)) ==
        std::vector<Pair>{{'a', 'b'}, {256, ' '}});
  // regex "ab ab" = "ab" + " ab": ab x2 -> 256; [256], [' ' 256] -> (' ', 256) = 257.
  CHECK(merge_pairs(BpeTokenizer::train("ab ab", 258, BpeMode::regex)) ==
        std::vector<Pair>{{'a', 'b'}, {' ', 256}});
  // "hi hi hi ho": "hi", " hi" x2, " ho". hi x3 (first), ' 'h x3 -> hi = 256; then
  // (' ', 256) x2 beats (' ', h) and (h, o) once each.
  CHECK(merge_pairs(BpeTokenizer::train("hi hi hi ho", 258, BpeMode::regex)) ==
        std::vector<Pair>{{'h', 'i'}, {' ', 256}});
  // Overlaps merge left to right: "aaa" has aa twice but makes [256 a].
  BpeTokenizer overlap = BpeTokenizer::train("aaa", 258, BpeMode::basic);
  CHECK(merge_pairs(overlap) == std::vector<Pair>{{'a', 'a'}, {256, 'a'}});
  CHECK(overlap.encode("aaaa") == std::vector<std::int32_t>{256, 256});
}

TEST_CASE("bpe: the GPT-4 split of contractions, numbers, punctuation and spaces", "[bpe]") {
  using V = std::vector<std::string>;
  CHECK(split_gpt4("it's we'll I've they're DON'T") ==
        V{"it", "'s", " we", "'ll", " I", "'ve", " they", "'re", " DON", "'T"});
  CHECK(split_gpt4("7 12 123 1234 12345") ==
        V{"7", " ", "12", " ", "123", " ", "123", "4", " ", "123", "45"});
  CHECK(split_gpt4("hello!!! world...\n\nx") == V{"hello", "!!!", " world", "...\n\n", "x"});
  CHECK(split_gpt4("x   \ny") == V{"x", "   \n", "y"});
  CHECK(split_gpt4("a   b") == V{"a", "  ", " b"});
  CHECK(split_gpt4("end  ") == V{"end", "  "});
}

TEST_CASE("bpe: the GPT-4 split of Cyrillic and CJK text", "[bpe]") {
  using V = std::vector<std::string>;
  // "Привет, мир" -> "Привет", ",", " мир"
  CHECK(split_gpt4("\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80") ==
        V{"\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", ",", " \xd0\xbc\xd0\xb8\xd1\x80"});
  // "你好世界2026" -> the letters as one chunk, then "202", "6"
  CHECK(split_gpt4("\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c" "2026") ==
        V{"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", "202", "6"});
}

TEST_CASE("bpe: the split keeps every byte, invalid UTF-8 included", "[bpe]") {
  std::string text = "ab\xff\xfe cd\xc3";
  std::string joined;
  for (const std::string& chunk : split_gpt4(text)) joined += chunk;
  CHECK(joined == text);
}

TEST_CASE("bpe: the fast trainer makes the reference trainer's merges", "[bpe]") {
  std::string text = varied_text(7, 900);
  REQUIRE(text.size() > 3000);
  SECTION("basic") {
    BpeTokenizer fast = BpeTokenizer::train(text, 256 + 150, BpeMode::basic);
    CHECK(merge_pairs(fast) == reference_merges({text}, 150));
  }
  SECTION("regex") {
    BpeTokenizer fast = BpeTokenizer::train(text, 256 + 150, BpeMode::regex);
    CHECK(merge_pairs(fast) ==
          reference_merges(RegexSplitter(std::string(gpt4_split_pattern)).split(text), 150));
  }
  SECTION("a three-letter alphabet: ties everywhere") {
    std::mt19937 random(3);
    std::string letters;
    for (int i = 0; i < 3000; ++i) letters += char('a' + random() % 3);
    BpeTokenizer fast = BpeTokenizer::train(letters, 256 + 120, BpeMode::basic);
    CHECK(merge_pairs(fast) == reference_merges({letters}, 120));
  }
  SECTION("short words of two letters, many seeds: ties and repeated chunks everywhere") {
    for (unsigned seed = 1; seed <= 8; ++seed) {
      std::mt19937 random(seed);
      std::string words;
      for (int i = 0; i < 1500; ++i) words += "ab "[random() % 3];
      BpeTokenizer fast = BpeTokenizer::train(words, 256 + 60, BpeMode::regex);
      CHECK(merge_pairs(fast) ==
            reference_merges(RegexSplitter(std::string(gpt4_split_pattern)).split(words), 60));
    }
  }
}

TEST_CASE("bpe: encode and decode round trip every byte string", "[bpe]") {
  std::string text = varied_text(11, 600);
  std::mt19937 random(5);
  for (BpeMode mode : {BpeMode::basic, BpeMode::regex}) {
    BpeTokenizer tokenizer = BpeTokenizer::train(text, 400, mode);
    CHECK(tokenizer.decode_bytes(tokenizer.encode(text)) == text);
    CHECK(tokenizer.encode(text).size() < text.size() / 2);
    for (int trial = 0; trial < 20; ++trial) {
      std::string bytes = random_bytes(random, 1 + random() % 300);
      std::vector<std::int32_t> ids = tokenizer.encode(bytes);
      CHECK(tokenizer.decode_bytes(ids) == bytes);
    }
  }
}

TEST_CASE("bpe: decode shows invalid UTF-8 as U+FFFD, decode_bytes keeps the bytes", "[bpe]") {
  const std::string replacement = "\xEF\xBF\xBD";
  CHECK(replace_invalid_utf8("a\xff" "b") == "a" + replacement + "b");
  // A truncated 3-byte sequence is one maximal invalid subpart: one U+FFFD.
  CHECK(replace_invalid_utf8("\xE2\x82" "A") == replacement + "A");
  // A surrogate (ED A0 80) is not UTF-8: ED alone is the subpart, then A0 and 80.
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == replacement + replacement + replacement);
  CHECK(replace_invalid_utf8("\xE2\x82\xAC") == "\xE2\x82\xAC");  // the euro sign is valid
  BpeTokenizer tokenizer = BpeTokenizer::train("abc", 256, BpeMode::regex);
  CHECK(tokenizer.decode({97, 255}) == "a" + replacement);
  CHECK(tokenizer.decode_bytes({97, 255}) == "a\xff");
}

TEST_CASE("bpe: special tokens take the ids after the merges and are never split", "[bpe]") {
  BpeTokenizer tokenizer = BpeTokenizer::train("aaaa", 256 + 1 + 2, BpeMode::regex,
                                               {"<|endoftext|>", "<|end|>"});
  REQUIRE(tokenizer.merges().size() == 1);  // (a, a) = 256
  CHECK(tokenizer.encode("aa<|endoftext|>a<|end|>") ==
        std::vector<std::int32_t>{256, 257, 'a', 258});
  std::vector<std::int32_t> as_text = tokenizer.encode("<|end|>", SpecialTokens::as_text);
  CHECK(as_text.size() == 7);
  CHECK(tokenizer.decode({256, 257}) == "aa<|endoftext|>");
  CHECK_THROWS_AS(tokenizer.decode({259}), std::out_of_range);
  CHECK_THROWS_AS(BpeTokenizer::train("a", 256, BpeMode::basic, {"<s>"}), std::invalid_argument);
  CHECK_THROWS_AS(BpeTokenizer::train("a", 260, BpeMode::basic, {"x", "x"}), std::invalid_argument);
}

TEST_CASE("bpe: save and load give the same tokenizer", "[bpe]") {
  std::string text = varied_text(13, 400);
  BpeTokenizer trained = BpeTokenizer::train(text, 256 + 60 + 1, BpeMode::regex, {"<|endoftext|>"});
  std::string path =
      (std::filesystem::temp_directory_path() / ("tapegrad_test_" + std::to_string(std::random_device{}()) + ".bpe")).string();
  trained.save(path);
  BpeTokenizer loaded = BpeTokenizer::load(path);
  std::remove(path.c_str());
  CHECK(merge_pairs(loaded) == merge_pairs(trained));
  CHECK(loaded.special_tokens() == trained.special_tokens());
  CHECK(loaded.pattern() == std::string(gpt4_split_pattern));
  CHECK(loaded.mode() == BpeMode::regex);
  CHECK(loaded.encode(text + "<|endoftext|>") == trained.encode(text + "<|endoftext|>"));
  BpeTokenizer copy = loaded;  // a copy has its own compiled pattern
  loaded = BpeTokenizer::train("xy", 257, BpeMode::regex);
  CHECK(copy.encode(text) == trained.encode(text));
}

TEST_CASE("bpe: a corrupt tokenizer file is an error naming the line", "[bpe]") {
  auto error_of = [](const std::string& contents) {
    try {
      BpeTokenizer::from_text(contents, "t.bpe");
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string head = "tapegrad-bpe 1\nmode basic\npattern \nspecials 0\n";
  CHECK(error_of(head + "merges 1\n97 98\n") == "no error");
  CHECK_THAT(error_of("tapegrad-bpe 2\n"), Catch::Contains("t.bpe, line 1"));
  CHECK_THAT(error_of("tapegrad-bpe 1\nmode fancy\n"), Catch::Contains("line 2"));
  CHECK_THAT(error_of(head + "merges 1\n300 5\n"), Catch::Contains("line 6") &&
                                                      Catch::Contains("not yet made"));
  CHECK_THAT(error_of(head + "merges 2\n97 98\n97 98\n"), Catch::Contains("line 7") &&
                                                            Catch::Contains("repeats"));
  CHECK_THAT(error_of(head + "merges 2\n97 98\n"), Catch::Contains("ends early"));
  CHECK_THAT(error_of(head + "merges 1\n97 x\n"), Catch::Contains("line 6"));
  CHECK_THAT(error_of(head + "merges 1\n97 98\nextra\n"), Catch::Contains("line 7"));
  CHECK_THAT(error_of("tapegrad-bpe 1\nmode regex\npattern (\n"), Catch::Contains("line 3"));
  CHECK_THAT(error_of("tapegrad-bpe 1\nmode basic\npattern \nspecials 1\n300 <s>\nmerges 0\n"),
             Catch::Contains("expected 256"));
}

TEST_CASE("bpe: encode gives minbpe's ids for short chunks and for one long chunk", "[bpe]") {
  std::string text = varied_text(17, 1200);
  for (BpeMode mode : {BpeMode::basic, BpeMode::regex}) {
    BpeTokenizer tokenizer = BpeTokenizer::train(text, 256 + 100, mode);
    std::string sample = varied_text(19, 200);
    std::vector<std::int32_t> expected;
    for (std::string_view chunk : mode == BpeMode::basic
                                      ? std::vector<std::string_view>{sample}
                                      : RegexSplitter(std::string(gpt4_split_pattern)).split(sample)) {
      std::vector<std::int32_t> part = reference_encode(tokenizer, chunk);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    CHECK(tokenizer.encode(sample) == expected);
  }
  // Over 64 KiB, basic mode's single chunk takes the list-per-merge path.
  std::string long_text = varied_text(23, 16000);
  REQUIRE(long_text.size() > (1u << 16));
  BpeTokenizer tokenizer = BpeTokenizer::train(text, 256 + 40, BpeMode::basic);
  CHECK(tokenizer.encode(long_text) == reference_encode(tokenizer, long_text));
}
