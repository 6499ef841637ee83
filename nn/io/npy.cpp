// The .npy reader is strict instead of xt::load_npy, because load_npy trusts the header (a
// hostile shape makes it allocate whatever the header claims) and this reader must take
// arbitrary bytes. Writing uses xtensor's npy writer.
#include "nn/io/npy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <variant>
#include <vector>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnpy.hpp>

#include "autograd/errors.hpp"  // fail_with and shape_str: messages built as the ops build theirs
#include "nn/io/untrusted_text.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the npy reader copies '<' data as native: little-endian hosts only");

namespace tapegrad {

namespace detail {

namespace {

constexpr std::size_t kMaxRank = 32;  // numpy's NPY_MAXDIMS

// ---------------------------------------------------------------------------------------
// npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// with exactly these three keys. Only that grammar is accepted.

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string("a dictionary key");
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (have_descr) bad("key 'descr' appears twice");
        if (peek() != '\'' && peek() != '"')
          bad("descr is not a simple dtype string (structured dtypes are not supported)");
        h.descr = parse_string("the descr");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) bad("key 'fortran_order' appears twice");
        h.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) bad("key 'shape' appears twice");
        h.shape = parse_shape();
        have_shape = true;
      } else {
        bad("unexpected key {}", quoted(key));
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') break;
      bad("expected ',' or '}}' at byte {}", i_);
    }
    expect('}');
    skip_ws();
    if (i_ != s_.size()) bad("unexpected bytes after the header dictionary");
    if (!have_descr || !have_order || !have_shape)
      bad("the header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  template <class... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> format, Args&&... args) const {
    fail_with<NpzError>(where_, "bad npy header: {}",
                        fmt::format(format, std::forward<Args>(args)...));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    if (peek() != c || i_ >= s_.size()) bad("expected '{}' at byte {}", c, i_);
    ++i_;
  }
  std::string parse_string(const char* what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string for {}", what);
    ++i_;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '\\' || c < 0x20 || c >= 0x7f) bad("unsupported character in {}", what);
      ++i_;
    }
    if (i_ >= s_.size()) bad("unterminated string in {}", what);
    std::string out(s_.substr(start, i_ - start));
    ++i_;
    return out;
  }
  bool parse_bool() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    bad("fortran_order is neither True nor False");
  }
  std::size_t parse_dim() {
    if (peek() < '0' || peek() > '9') bad("a shape dimension is not a non-negative integer");
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const unsigned d = static_cast<unsigned>(peek() - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
        bad("a shape dimension overflows 64 bits");
      v = v * 10 + d;
      ++i_;
    }
    return static_cast<std::size_t>(v);
  }
  // "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is the integer 3 in Python, not a shape.
  std::vector<std::size_t> parse_shape() {
    expect('(');
    std::vector<std::size_t> shape;
    bool trailing_comma = false;
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      if (shape.size() == kMaxRank) bad("shape has more than 32 dimensions");
      shape.push_back(parse_dim());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in the shape");
    }
    expect(')');
    if (shape.size() == 1 && !trailing_comma)
      bad("shape '(n)' is not a tuple; numpy writes '(n,)'");
    return shape;
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------
// npy payload -> xarray

enum class Kind { f4, f8, i8, i4, b1 };
struct Descr {
  Kind kind;
  std::size_t itemsize;
  bool big_endian;
};

bool parse_descr(const std::string& d, Descr& out) {
  if (d == "|b1") {
    out = {Kind::b1, 1, false};
    return true;
  }
  if (d.size() != 3 || (d[0] != '<' && d[0] != '>')) return false;
  const bool big = d[0] == '>';
  const std::string t = d.substr(1);
  if (t == "f4")
    out = {Kind::f4, 4, big};
  else if (t == "f8")
    out = {Kind::f8, 8, big};
  else if (t == "i8")
    out = {Kind::i8, 8, big};
  else if (t == "i4")
    out = {Kind::i4, 4, big};
  else
    return false;
  return true;
}

template <class In>
In read_value(const char* p, bool swap) {
  unsigned char b[sizeof(In)];
  std::memcpy(b, p, sizeof(In));
  if (swap) std::reverse(b, b + sizeof(In));
  In v;
  std::memcpy(&v, b, sizeof(In));
  return v;
}

// `count` values of type In at `p` -> a row-major xarray<Out> of `shape`. numpy's
// Fortran order stores the reversed-shape array row-major, so read that and transpose.
template <class Out, class In>
xt::xarray<Out> decode(const char* p, std::size_t count, const std::vector<std::size_t>& shape,
                       bool swap, bool fortran) {
  std::vector<std::size_t> storage_shape = shape;
  if (fortran) std::reverse(storage_shape.begin(), storage_shape.end());
  auto a = xt::xarray<Out>::from_shape(storage_shape);
  Out* out = a.data();
  for (std::size_t k = 0; k < count; ++k) {
    const In v = read_value<In>(p + k * sizeof(In), swap);
    if constexpr (std::is_same_v<In, std::uint8_t>)
      out[k] = v != 0 ? 1 : 0;  // numpy bool
    else
      out[k] = static_cast<Out>(v);
  }
  if (fortran && shape.size() > 1) return xt::xarray<Out>(xt::transpose(a));
  return a;
}

}  // namespace

NpzEntry::Array parse_npy(std::string_view b, const std::string& where) {
  static constexpr char kMagic[] = "\x93NUMPY";
  constexpr std::size_t kMagicLen = sizeof(kMagic) - 1;
  if (b.size() < kMagicLen + 2 || b.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    fail_with<NpzError>(where, "not an npy array (bad magic)");
  const unsigned major = static_cast<unsigned char>(b[kMagicLen]);
  const unsigned minor = static_cast<unsigned char>(b[kMagicLen + 1]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail_with<NpzError>(where, "unsupported npy format version {}.{}", major, minor);
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  std::size_t pos = kMagicLen + 2;
  if (b.size() < pos + len_bytes) fail_with<NpzError>(where, "truncated npy header");
  std::uint64_t header_len = 0;
  for (std::size_t k = 0; k < len_bytes; ++k)
    header_len |= std::uint64_t{static_cast<unsigned char>(b[pos + k])} << (8 * k);
  pos += len_bytes;
  if (header_len > b.size() - pos)
    fail_with<NpzError>(where, "npy header claims {} bytes but only {} follow", header_len,
                        b.size() - pos);
  const NpyHeader h = HeaderParser(b.substr(pos, header_len), where).parse();
  pos += header_len;

  Descr d{};
  if (!parse_descr(h.descr, d))
    fail_with<NpzError>(where,
                        "unsupported dtype {} (readable: <f4 <f8 <i8 <i4 |b1, and big-endian "
                        ">f4 >f8 >i8 >i4)",
                        quoted(h.descr));

  // Element count, refusing any shape whose extent overflows (zero dimensions included:
  // xtensor's strides are products of the other dimensions).
  const std::uint64_t limit =
      static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / 8;
  std::uint64_t extent = 1, count = 1;
  for (std::size_t dim : h.shape) {
    const std::uint64_t dd = std::max<std::uint64_t>(dim, 1);
    if (extent > limit / dd) fail_with<NpzError>(where, "shape {} overflows", shape_str(h.shape));
    extent *= dd;
    count *= dim;
  }
  const std::uint64_t payload = b.size() - pos;
  const std::uint64_t needed = count * d.itemsize;
  if (needed != payload)
    fail_with<NpzError>(where, "shape {} of {} needs {} data bytes but the array holds {}",
                        shape_str(h.shape), h.descr, needed, payload);

  const char* p = b.data() + pos;
  const std::size_t n = static_cast<std::size_t>(count);
  const bool swap = d.big_endian;
  const bool f = h.fortran_order;
  switch (d.kind) {
    case Kind::f4: return decode<float, float>(p, n, h.shape, swap, f);
    case Kind::f8: return decode<double, double>(p, n, h.shape, swap, f);
    case Kind::i8: return decode<std::int64_t, std::int64_t>(p, n, h.shape, swap, f);
    case Kind::i4: return decode<std::int64_t, std::int32_t>(p, n, h.shape, swap, f);
    case Kind::b1: return decode<std::int64_t, std::uint8_t>(p, n, h.shape, false, f);
  }
  fail_with<NpzError>(where, "unreachable dtype");
}

std::string npy_bytes(const NpzEntry::Array& array) {
  return std::visit([](const auto& a) { return xt::dump_npy(a); }, array);
}

}  // namespace detail

NpzEntry::Array load_npy_bytes(std::string_view bytes, const std::string& label) {
  try {
    return detail::parse_npy(bytes, "load_npy: " + label);
  } catch (const std::bad_alloc&) {
    fail_with<NpzError>("load_npy: " + label, "out of memory while reading");
  }
}

}  // namespace tapegrad
