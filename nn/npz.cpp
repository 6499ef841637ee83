// npz = zip (libzip) of npy members. Writing uses xtensor's npy writer; reading uses the
// strict parser below instead of xt::load_npy, because load_npy trusts the header (a
// hostile shape makes it allocate whatever the header claims) and this reader must take
// arbitrary bytes: every length is checked against the bytes actually present before
// anything is allocated.
#include "nn/npz.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnpy.hpp>
#include <zip.h>

#include "autograd/errors.hpp"  // fail_with and shape_str: messages built as the ops build theirs

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the npy reader copies '<' data as native: little-endian hosts only");

namespace tapegrad {

namespace {

constexpr std::size_t kMaxNameBytes = 1024;
// A member (or all members together) larger than this is rejected before reading; numpy
// has no such limit, a checkpoint of this project never comes close.
constexpr std::uint64_t kMaxMemberBytes = std::uint64_t{4} << 30;
constexpr std::uint64_t kMaxTotalBytes = std::uint64_t{8} << 30;
constexpr std::size_t kMaxRank = 32;  // numpy's NPY_MAXDIMS
constexpr std::size_t kReadChunk = std::size_t{1} << 20;
// A fixed member time (2000-01-01) makes the same arrays give the same file, byte for byte.
constexpr time_t kMemberMtime = 946684800;

std::string quoted(std::string_view s) {
  // Names come from hostile files: show them bounded and without control bytes.
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

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

// ---------------------------------------------------------------------------------------
// zip (libzip)

struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;

std::string zip_error_text(zip_error_t* e) {
  std::string s = zip_error_strerror(e);
  zip_error_fini(e);
  return s;
}

// Reads one member fully, never holding more than what it actually decompressed (plus
// one chunk), whatever its header claims.
std::string read_member(zip_t* za, zip_uint64_t index, std::uint64_t claimed,
                        const std::string& where) {
  zip_file_t* f = zip_fopen_index(za, index, 0);
  if (!f) fail_with<NpzError>(where, "cannot open the member (libzip: {})", zip_strerror(za));
  std::string data;
  std::string err;
  // No exception may pass before zip_fclose: an allocation failure becomes `err`.
  try {
    data.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(claimed, kReadChunk)));
    for (;;) {
      if (data.size() == claimed) {
        char extra;
        const zip_int64_t n = zip_fread(f, &extra, 1);
        if (n < 0)
          err = std::string("read error (libzip: ") + zip_file_strerror(f) + ")";
        else if (n > 0)
          err =
              "member holds more than the " + std::to_string(claimed) + " bytes its header claims";
        break;
      }
      const std::size_t old = data.size();
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(claimed - old, kReadChunk));
      data.resize(old + want);
      const zip_int64_t n = zip_fread(f, &data[old], want);
      if (n < 0) {
        err = std::string("read error (libzip: ") + zip_file_strerror(f) + ")";
        break;
      }
      data.resize(old + static_cast<std::size_t>(n));
      if (n == 0) {
        err = "member is truncated: " + std::to_string(old) + " of " + std::to_string(claimed) +
              " bytes";
        break;
      }
    }
  } catch (const std::bad_alloc&) {
    err = "out of memory reading " + std::to_string(claimed) + " bytes";
  }
  const int close_rc = zip_fclose(f);
  if (!err.empty()) fail_with<NpzError>(where, "{}", err);
  if (close_rc != 0) {
    zip_error_t e;
    zip_error_init_with_code(&e, close_rc);
    fail_with<NpzError>(where, "damaged member (libzip: {})", zip_error_text(&e));
  }
  return data;
}

// The sizes a member's directory record claims, checked against the archive before any
// byte is read: numpy writes stored or deflated members, a stored member is as long as
// its compressed bytes, and deflate cannot expand more than 1032:1. So what a hostile
// header may make us read is bounded by the file's own size (and the caps above).
void check_member_sizes(const zip_stat_t& st, std::size_t archive_bytes, std::uint64_t total,
                        const std::string& where) {
  const std::uint64_t need = ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  if ((st.valid & need) != need) fail_with<NpzError>(where, "incomplete directory record");
  if (st.encryption_method != ZIP_EM_NONE)
    fail_with<NpzError>(where, "encrypted members are not supported");
  if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
    fail_with<NpzError>(where,
                        "compression method {} is not supported (numpy writes stored or deflated "
                        "members)",
                        st.comp_method);
  if (st.comp_size > archive_bytes)
    fail_with<NpzError>(where, "claims {} compressed bytes in a {}-byte archive", st.comp_size,
                        archive_bytes);
  if (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)
    fail_with<NpzError>(where, "stored member claims {} bytes but holds {}", st.size, st.comp_size);
  if (st.comp_method == ZIP_CM_DEFLATE && st.size / 1032 > st.comp_size)
    fail_with<NpzError>(where, "claims {} bytes from {} deflated bytes, beyond deflate's ratio",
                        st.size, st.comp_size);
  if (st.size > kMaxMemberBytes)
    fail_with<NpzError>(where, "claims {} bytes, over the 4 GiB member limit", st.size);
  if (st.size > kMaxTotalBytes - total)
    fail_with<NpzError>(where, "the archive's members add up to more than the 8 GiB limit");
}

std::vector<NpzEntry> read_zip(std::string_view bytes, const std::string& label) {
  const std::string where = "load_npz: " + label;
  if (bytes.empty()) fail_with<NpzError>(where, "empty file, not an npz archive");
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  if (!src) fail_with<NpzError>(where, "cannot read the bytes (libzip: {})", zip_error_text(&err));
  ZipPtr za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!za) {
    zip_source_free(src);
    fail_with<NpzError>(where, "not a valid zip archive (libzip: {})", zip_error_text(&err));
  }
  zip_error_fini(&err);

  const zip_int64_t n = zip_get_num_entries(za.get(), 0);
  if (n < 0) fail_with<NpzError>(where, "cannot list the archive's members");
  std::vector<NpzEntry> entries;
  std::set<std::string> seen;
  std::uint64_t total = 0;
  for (zip_int64_t i = 0; i < n; ++i) {
    const zip_uint64_t index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), index, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE) || st.name == nullptr)
      fail_with<NpzError>(where, "member #{} has an unreadable directory record", i);
    const std::string member = st.name;
    const std::string mwhere = where + ": member " + quoted(member);
    constexpr std::string_view suffix = ".npy";
    if (member.size() <= suffix.size() ||
        std::string_view(member).substr(member.size() - suffix.size()) != suffix)
      fail_with<NpzError>(mwhere, "not an .npy member");
    std::string name = member.substr(0, member.size() - suffix.size());
    check_npz_name(name, mwhere);
    if (!seen.insert(name).second) fail_with<NpzError>(mwhere, "appears twice in the archive");
    check_member_sizes(st, bytes.size(), total, mwhere);
    total += st.size;
    const std::string data = read_member(za.get(), index, st.size, mwhere);
    entries.emplace_back(std::move(name), parse_npy(data, mwhere));
  }
  return entries;
}

std::string dump_entry(const NpzEntry& e) {
  return std::visit([](const auto& a) { return xt::dump_npy(a); }, e.array);
}

std::string build_zip(const std::vector<NpzEntry>& entries, bool compress,
                      const std::string& where) {
  std::set<std::string> seen;
  for (const NpzEntry& e : entries) {
    check_npz_name(e.name, where);
    if (!seen.insert(e.name).second)
      fail_with<NpzError>(where, "entry name {} appears twice", quoted(e.name));
  }
  // libzip writes nothing at all for an archive without members.
  if (entries.empty()) fail_with<NpzError>(where, "no entries to save");
  std::vector<std::string> npys;
  npys.reserve(entries.size());
  for (const NpzEntry& e : entries) npys.push_back(dump_entry(e));

  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &err);
  if (!src)
    fail_with<NpzError>(where, "cannot create a zip buffer (libzip: {})", zip_error_text(&err));
  ZipPtr za(zip_open_from_source(src, ZIP_TRUNCATE, &err));
  if (!za) {
    zip_source_free(src);
    fail_with<NpzError>(where, "cannot create a zip archive (libzip: {})", zip_error_text(&err));
  }
  zip_error_fini(&err);
  // Keep the buffer alive past zip_close, which is when libzip writes into it.
  zip_source_keep(src);
  std::unique_ptr<zip_source_t, decltype(&zip_source_free)> src_guard(src, &zip_source_free);

  for (std::size_t k = 0; k < entries.size(); ++k) {
    zip_source_t* s = zip_source_buffer(za.get(), npys[k].data(), npys[k].size(), 0);
    if (!s) fail_with<NpzError>(where, "libzip: {}", zip_strerror(za.get()));
    const std::string member = entries[k].name + ".npy";
    const zip_int64_t idx = zip_file_add(za.get(), member.c_str(), s, ZIP_FL_ENC_GUESS);
    if (idx < 0) {
      zip_source_free(s);
      fail_with<NpzError>(where, "cannot add {} (libzip: {})", quoted(member),
                          zip_strerror(za.get()));
    }
    const zip_uint64_t u = static_cast<zip_uint64_t>(idx);
    if (zip_set_file_compression(za.get(), u, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0 ||
        zip_file_set_mtime(za.get(), u, kMemberMtime, 0) != 0)
      fail_with<NpzError>(where, "libzip: {}", zip_strerror(za.get()));
  }
  if (zip_close(za.get()) != 0)
    fail_with<NpzError>(where, "cannot write the zip (libzip: {})", zip_strerror(za.get()));
  za.release();  // zip_close freed it

  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(src, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) || zip_source_open(src) != 0)
    fail_with<NpzError>(where, "cannot read back the zip buffer");
  std::string out(static_cast<std::size_t>(st.size), '\0');
  const zip_int64_t got = zip_source_read(src, out.data(), out.size());
  zip_source_close(src);
  if (got < 0 || static_cast<std::uint64_t>(got) != st.size)
    fail_with<NpzError>(where, "cannot read back the zip buffer");
  return out;
}

std::string errno_text(int e) { return std::strerror(e); }

// 0, or the errno of the failed write.
int write_all(int fd, const std::string& bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------

const char* npz_dtype_name(NpzDtype dtype) {
  switch (dtype) {
    case NpzDtype::float32: return "float32";
    case NpzDtype::float64: return "float64";
    case NpzDtype::int64: return "int64";
  }
  return "unknown";
}

namespace detail {
void throw_npz_dtype_mismatch(const std::string& name, NpzDtype wanted, NpzDtype held) {
  fail_with<NpzError>(fmt::format("npz entry {}", quoted(name)), "holds {}, not {}",
                      npz_dtype_name(held), npz_dtype_name(wanted));
}
}  // namespace detail

std::vector<std::size_t> NpzEntry::shape() const {
  return std::visit(
      [](const auto& a) { return std::vector<std::size_t>(a.shape().begin(), a.shape().end()); },
      array);
}

const NpzEntry* find_npz_entry(const std::vector<NpzEntry>& entries, std::string_view name) {
  for (const NpzEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

void check_npz_name(const std::string& name, const std::string& what) {
  if (name.empty()) fail_with<NpzError>(what, "empty entry name");
  if (name.size() > kMaxNameBytes)
    fail_with<NpzError>(what, "entry name {} is longer than 1024 bytes", quoted(name));
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      fail_with<NpzError>(what, "entry name {} contains '/', '\\' or NUL", quoted(name));
}

std::string save_npz_bytes(const std::vector<NpzEntry>& entries, bool compress) {
  return build_zip(entries, compress, "save_npz");
}

void save_npz(const std::string& path, const std::vector<NpzEntry>& entries, bool compress) {
  const std::string where = "save_npz: '" + path + "'";
  const std::string bytes = build_zip(entries, compress, where);

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail_with<NpzError>(where, "cannot create the temporary file '{}': {}", tmp, errno_text(errno));
  const char* step = "write";
  int e = write_all(fd, bytes);
  if (e == 0) {
    step = "fsync";
    if (::fsync(fd) != 0) e = errno;
  }
  if (::close(fd) != 0 && e == 0) {
    step = "close";
    e = errno;
  }
  if (e == 0) {
    step = "rename";
    if (::rename(tmp.c_str(), path.c_str()) != 0) e = errno;
  }
  if (e != 0) {
    ::unlink(tmp.c_str());
    fail_with<NpzError>(where,
                        "cannot {} the temporary file '{}': {} (the previous file, if any, is "
                        "unchanged)",
                        step, tmp, errno_text(e));
  }
  // Make the rename itself durable. Some filesystems refuse to fsync a directory; the
  // file is already in place, so that is not an error.
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<NpzEntry> load_npz_bytes(std::string_view bytes, const std::string& label) {
  try {
    return read_zip(bytes, label);
  } catch (const std::bad_alloc&) {
    fail_with<NpzError>("load_npz: " + label, "out of memory while reading");
  }
}

NpzEntry::Array load_npy_bytes(std::string_view bytes, const std::string& label) {
  try {
    return parse_npy(bytes, "load_npy: " + label);
  } catch (const std::bad_alloc&) {
    fail_with<NpzError>("load_npy: " + label, "out of memory while reading");
  }
}

std::vector<NpzEntry> load_npz(const std::string& path) {
  const std::string where = "load_npz: '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_with<NpzError>(where, "cannot open: {}", errno_text(errno));
  std::string bytes;
  std::string err;
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    err = "cannot stat: " + errno_text(errno);
  } else if (!S_ISREG(sb.st_mode)) {
    err = "not a regular file";
  } else {
    try {
      bytes.resize(static_cast<std::size_t>(sb.st_size));
    } catch (const std::exception&) {
      err = "too large to read (" + std::to_string(sb.st_size) + " bytes)";
    }
    std::size_t got = 0;
    while (err.empty() && got < bytes.size()) {
      const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        err = "read error: " + errno_text(errno);
      else if (n == 0)
        bytes.resize(got);  // shrank while reading
      else
        got += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (!err.empty()) fail_with<NpzError>(where, "{}", err);
  return load_npz_bytes(bytes, "'" + path + "'");
}

}  // namespace tapegrad
