#include "nn/io/zip_archive.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include <zip.h>

#include "autograd/errors.hpp"  // fail_with: messages built as the ops build theirs
#include "nn/io/npz_error.hpp"
#include "nn/io/untrusted_text.hpp"

namespace tapegrad::detail {

namespace {

// A member (or all members together) larger than this is rejected before reading; numpy
// has no such limit, a checkpoint of this project never comes close.
constexpr std::uint64_t kMaxMemberBytes = std::uint64_t{4} << 30;
constexpr std::uint64_t kMaxTotalBytes = std::uint64_t{8} << 30;
constexpr std::size_t kReadChunk = std::size_t{1} << 20;
// A fixed member time (2000-01-01) makes the same arrays give the same file, byte for byte.
constexpr time_t kMemberMtime = 946684800;

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

}  // namespace

void read_zip(std::string_view bytes, const std::string& where, const ZipNameCheck& check_name,
              const ZipMemberSink& take) {
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
    check_name(member, mwhere);
    check_member_sizes(st, bytes.size(), total, mwhere);
    total += st.size;
    take(member, read_member(za.get(), index, st.size, mwhere), mwhere);
  }
}

std::string build_zip(const std::vector<ZipMember>& members, bool compress,
                      const std::string& where) {
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

  for (std::size_t k = 0; k < members.size(); ++k) {
    zip_source_t* s = zip_source_buffer(za.get(), members[k].bytes.data(), members[k].bytes.size(), 0);
    if (!s) fail_with<NpzError>(where, "libzip: {}", zip_strerror(za.get()));
    const std::string& member = members[k].name;
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

}  // namespace tapegrad::detail
