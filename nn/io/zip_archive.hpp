#pragma once
// The zip container of an npz (libzip): members read from bytes that may be hostile (every
// size a directory record claims is checked against the archive before anything is read),
// and an archive built in memory. Errors are NpzError, as for the rest of the npz layer.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::detail {

struct ZipMember {
  std::string name;   // the member's file name inside the archive
  std::string bytes;  // its uncompressed contents
};

// Called with a member's name (and `where` naming it) before anything of it is read; throws
// to refuse the member.
using ZipNameCheck = std::function<void(const std::string& name, const std::string& where)>;
// Called with a member's name, its bytes and `where` naming it.
using ZipMemberSink =
    std::function<void(const std::string& name, std::string bytes, const std::string& where)>;

// Reads the members of the zip in `bytes`, in archive order: for each, `check_name`, then
// the size checks (stored or deflated, not encrypted, no more than the archive's bytes or
// deflate's ratio can give, 4 GiB per member and 8 GiB together), then `take` with its
// bytes. Errors name `where`, and a member's errors "<where>: member '<name>'".
void read_zip(std::string_view bytes, const std::string& where, const ZipNameCheck& check_name,
              const ZipMemberSink& take);

// A zip of `members`, in order, stored or deflated (`compress`), every member with the same
// fixed time so that the same members give the same bytes. Errors name `where`.
std::string build_zip(const std::vector<ZipMember>& members, bool compress,
                      const std::string& where);

}  // namespace tapegrad::detail
